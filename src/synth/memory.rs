//! What the platform says about memory: what this process may use (for the default cell-memory limit) and
//! the process's peak (for the diagnostics).

/// The process's peak resident memory (Linux `VmHWM`), if the platform says.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The memory this process may use, if the platform says: the least of the machine's physical memory
/// (Linux `MemTotal`), the address-space limit (`ulimit -v`, RLIMIT_AS) and the memory limit of the
/// process's control group (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`). A batch job under Slurm
/// or a container has far less than the machine.
pub fn usable_memory_bytes() -> Option<u64> {
    [physical_memory_bytes(), address_space_limit(), control_group_limit()].into_iter().flatten().min()
}

/// Total physical memory (Linux `MemTotal`), if the platform says.
fn physical_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(target_os = "linux")]
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(target_os = "linux"))]
fn address_space_limit() -> Option<u64> {
    None
}

/// The memory limit of this process's control group, if it has one (an unlimited group reads as "max" in
/// v2 and as a number near 2^63 in v1, both of which are no limit).
fn control_group_limit() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let limits = groups.lines().filter_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let file = match controllers {
            "" => format!("/sys/fs/cgroup{path}/memory.max"),
            _ if controllers.split(',').any(|controller| controller == "memory") => {
                format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
            }
            _ => return None,
        };
        std::fs::read_to_string(file).ok()?.trim().parse::<u64>().ok()
    });
    limits.filter(|&bytes| bytes < 1 << 62).min()
}
