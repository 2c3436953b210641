//! Progress on a terminal, silence in batch (docs/design.md): a bar is drawn only when stderr is a terminal
//! and the user did not ask for `--quiet`. Passed down explicitly so library callers choose; a library
//! caller may instead watch the phases itself and ask a run to stop ([`ProgressWatcher`]: the Python
//! package's logger, tqdm bar and Ctrl-C).

use std::io::IsTerminal;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use crate::error::{Error, Result};

pub struct Progress {
    show: bool,
    watcher: Option<Arc<dyn ProgressWatcher>>,
}

/// A library caller's view of a run: told each phase's start, advance and end (from worker threads), and
/// asked between batches whether the run should stop.
pub trait ProgressWatcher: Send + Sync {
    fn started(&self, phase: &str, total: u64, unit: &str);
    fn advanced(&self, phase: &str, units: u64);
    fn finished(&self, phase: &str);
    /// Whether the caller asked the run to stop; the run then fails with [`Error::Interrupted`].
    fn interrupted(&self) -> bool;
}

/// One phase's bar (or nothing), and its watcher.
pub struct PhaseBar {
    bar: Option<ProgressBar>,
    watcher: Option<(Arc<dyn ProgressWatcher>, String)>,
}

impl Progress {
    /// Bars on a terminal unless `quiet`.
    pub fn for_terminal(quiet: bool) -> Self {
        Progress { show: !quiet && std::io::stderr().is_terminal(), watcher: None }
    }

    pub fn hidden() -> Self {
        Progress { show: false, watcher: None }
    }

    /// No bar; every phase is reported to `watcher`, which can stop the run.
    pub fn watched(watcher: Arc<dyn ProgressWatcher>) -> Self {
        Progress { show: false, watcher: Some(watcher) }
    }

    /// A bar counting `total` units of `unit` (for example rows) for one phase.
    pub fn phase(&self, label: &str, total: u64, unit: &str) -> PhaseBar {
        let watcher = self.watch(label, total, unit);
        if !self.show {
            return PhaseBar { bar: None, watcher };
        }
        let bar = ProgressBar::new(total);
        let template =
            format!("{{prefix:>10}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} ({{rate}} {unit}/s, eta {{eta}})");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            let rate = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = out.write_str(&si_prefixed(state.per_sec()));
            };
            bar.set_style(style.with_key("rate", rate).progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        PhaseBar { bar: Some(bar), watcher }
    }

    /// A spinner with the elapsed time for one phase whose work is not counted in units (choosing and
    /// fitting pair maps, eval's comparisons), so that a long phase still shows it is running.
    pub fn step(&self, label: &str) -> PhaseBar {
        let watcher = self.watch(label, 0, "");
        if !self.show {
            return PhaseBar { bar: None, watcher };
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{prefix:>10} {spinner} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        PhaseBar { bar: Some(bar), watcher }
    }

    /// Tells the watcher, if any, that phase `label` started; its handle for the phase's bar.
    fn watch(&self, label: &str, total: u64, unit: &str) -> Option<(Arc<dyn ProgressWatcher>, String)> {
        self.watcher.as_ref().map(|watcher| {
            watcher.started(label, total, unit);
            (watcher.clone(), label.to_string())
        })
    }

    /// [`Error::Interrupted`] once the watcher asked the run to stop.
    pub fn check_interrupted(&self) -> Result<()> {
        match &self.watcher {
            Some(watcher) if watcher.interrupted() => Err(Error::Interrupted),
            _ => Ok(()),
        }
    }
}

/// `value` with three significant digits and an SI prefix: 3 828 632.4 is "3.83 M".
pub fn si_prefixed(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    let (scaled, prefix) = [(1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")]
        .into_iter()
        .find(|&(scale, _)| value.abs() >= scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, prefix));
    let decimals = match scaled.abs() {
        magnitude if magnitude >= 100.0 => 0,
        magnitude if magnitude >= 10.0 => 1,
        _ => 2,
    };
    format!("{scaled:.decimals$}{prefix}")
}

impl PhaseBar {
    /// Counts `units` more done, then fails with [`Error::Interrupted`] if the watcher asked the run to
    /// stop (the loops of long phases call this between batches).
    pub fn advance(&self, units: u64) -> Result<()> {
        if let Some(bar) = &self.bar {
            bar.inc(units);
        }
        match &self.watcher {
            Some((watcher, phase)) => {
                watcher.advanced(phase, units);
                if watcher.interrupted() {
                    return Err(Error::Interrupted);
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        if let Some((watcher, phase)) = self.watcher {
            watcher.finished(&phase);
        }
    }
}

/// Wall-clock seconds of one phase of a run, and of its parts where they were timed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub seconds: f64,
    /// The phase's parts, in the order they ran. Parts that overlap (sampling runs while the previous
    /// batch is written) are busy times and may sum to more than the phase.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PhaseTiming>,
}

impl PhaseTiming {
    pub fn new(phase: &'static str, seconds: f64) -> Self {
        PhaseTiming { phase, seconds, parts: Vec::new() }
    }
}

/// The phases of one run, timed in the order they ran (owner-only diagnostics).
#[derive(Debug, Default)]
pub struct Timings(Vec<PhaseTiming>);

impl Timings {
    /// Runs `work` as the phase `phase` and records its wall-clock time.
    pub fn time<T>(&mut self, phase: &'static str, work: impl FnOnce() -> T) -> T {
        self.time_in_parts(phase, |_| work())
    }

    /// As [`time`](Self::time), `work` timing the phase's parts in the `Timings` it is given.
    pub fn time_in_parts<T>(&mut self, phase: &'static str, work: impl FnOnce(&mut Timings) -> T) -> T {
        let started = std::time::Instant::now();
        let mut parts = Timings::default();
        let outcome = work(&mut parts);
        self.0.push(PhaseTiming { phase, seconds: started.elapsed().as_secs_f64(), parts: parts.0 });
        outcome
    }

    /// Records a phase timed elsewhere (a busy time summed over batches).
    pub fn record(&mut self, phase: &'static str, seconds: f64) {
        self.0.push(PhaseTiming::new(phase, seconds));
    }

    pub fn into_phases(self) -> Vec<PhaseTiming> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::si_prefixed;

    #[test]
    fn rates_read_with_an_si_prefix_and_three_digits() {
        assert_eq!(si_prefixed(3_828_632.425_6), "3.83 M");
        assert_eq!(si_prefixed(45_210.0), "45.2 k");
        assert_eq!(si_prefixed(999.0), "999");
        assert_eq!(si_prefixed(2.5e9), "2.50 G");
        assert_eq!(si_prefixed(0.5), "0.50");
        assert_eq!(si_prefixed(f64::NAN), "-");
    }
}
