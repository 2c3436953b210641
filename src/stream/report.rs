//! The publishable report of one release of a stream: everything in it is public input (ε, bounds,
//! columns, t) or a function of public input (depth, spends, schedule).

use serde::Serialize;

use crate::mechanism::online::plan::ScheduleDescription;
use crate::mechanism::online::state::OnlineState;
use crate::mechanism::options::value_name;
use crate::synth::report::{ColumnInfo, ToolInfo};

use super::StreamRequest;

#[derive(Clone, Debug, Serialize)]
pub struct StreamReleaseReport {
    pub tool: ToolInfo,
    pub mechanism: &'static str,
    /// The stream position of this release; the table has exactly this many rows.
    pub t: u64,
    pub synthetic_rows: u64,
    /// The tree depth at t, floor(log2(εt)) (0 while εt < 2).
    pub depth: u32,
    pub columns: Vec<ColumnInfo>,
    pub placement: String,
    pub consistency: &'static str,
    pub guarantee: StreamGuarantee,
    pub schedule: ScheduleDescription,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreamGuarantee {
    /// ε of the whole sequence of releases of this stream, past and future.
    pub epsilon: f64,
    pub delta: f64,
    /// The most any element of the stream has cost so far along one root-to-leaf path (never above ε/2).
    pub epsilon_spent_per_path: f64,
    /// Both paths of a replaced element: never above ε.
    pub epsilon_spent: f64,
    pub neighbours: &'static str,
    pub covers: &'static str,
    pub public_inputs: Vec<String>,
    pub fit_for_release: bool,
    pub noise: &'static str,
}

impl StreamReleaseReport {
    pub(super) fn new(
        request: &StreamRequest,
        state: &OnlineState,
        t: u64,
        epsilon_spent_per_path: f64,
        epsilon_spent: f64,
    ) -> Self {
        let plan = &request.plan;
        StreamReleaseReport {
            tool: ToolInfo::current(),
            mechanism: "online (He-Vershynin-Zhu continual release: growing dyadic tree, sparse counters with the Binary Mechanism)",
            t,
            synthetic_rows: t,
            depth: state.tree.depth(),
            columns: request
                .parameters
                .columns
                .iter()
                .map(|column| ColumnInfo {
                    name: column.name.clone(),
                    data_type: column.data_type.clone(),
                    lo: column.lo,
                    hi: column.hi,
                    encoding: None,
                })
                .collect(),
            placement: value_name(&request.placement),
            consistency: "top-down (PMM's uniform rule), the root set to the public t",
            guarantee: StreamGuarantee {
                epsilon: plan.epsilon(),
                delta: 0.0,
                epsilon_spent_per_path,
                epsilon_spent,
                neighbours: "replace: two streams differ in one element x_s (same length); t is public",
                covers: "every release of this stream, past and future, together (continual release): \
                         one element's change moves the counts of two root-to-leaf paths, each within epsilon/2",
                public_inputs: vec![
                    "epsilon".into(),
                    "columns and their bounds".into(),
                    "t (the stream position) and the release times".into(),
                    "placement".into(),
                ],
                fit_for_release: request.parameters.seed.is_none(),
                noise: "exact discrete Laplace (integer arithmetic) from per-cell ChaCha12 streams; scales rounded up",
            },
            schedule: plan.schedule(),
        }
    }
}
