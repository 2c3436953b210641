//! Progress on a terminal, silence in batch (docs/design.md): a bar is drawn only when stderr is a terminal
//! and the user did not ask for `--quiet`. Passed down explicitly so library callers choose.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    show: bool,
}

/// One phase's bar (or nothing).
pub struct PhaseBar(Option<ProgressBar>);

impl Progress {
    /// Bars on a terminal unless `quiet`.
    pub fn for_terminal(quiet: bool) -> Self {
        Progress {
            show: !quiet && std::io::stderr().is_terminal(),
        }
    }

    pub fn hidden() -> Self {
        Progress { show: false }
    }

    /// A bar counting `total` units of `unit` (for example rows) for one phase.
    pub fn phase(&self, label: &str, total: u64, unit: &str) -> PhaseBar {
        if !self.show {
            return PhaseBar(None);
        }
        let bar = ProgressBar::new(total);
        let template = format!("{{prefix:>10}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, eta {{eta}})");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        PhaseBar(Some(bar))
    }
}

impl PhaseBar {
    pub fn advance(&self, units: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(units);
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

/// Wall-clock seconds of one phase of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub seconds: f64,
}

/// The phases of one run, timed in the order they ran (owner-only diagnostics).
#[derive(Debug, Default)]
pub struct Timings(Vec<PhaseTiming>);

impl Timings {
    /// Runs `work` as the phase `phase` and records its wall-clock time.
    pub fn time<T>(&mut self, phase: &'static str, work: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let outcome = work();
        self.0.push(PhaseTiming {
            phase,
            seconds: started.elapsed().as_secs_f64(),
        });
        outcome
    }

    pub fn into_phases(self) -> Vec<PhaseTiming> {
        self.0
    }
}
