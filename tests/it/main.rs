//! The integration tests, one binary (one link instead of one per file). Each module exercises one
//! part of the CLI or library; `common` holds the fixtures and helpers they share.

mod common;

mod accuracy;
mod bad_input;
mod binner_conformance;
mod bundled_dataset;
mod calibration;
mod cli_surface;
mod cluster;
mod covloss;
mod dataset;
mod docs;
mod eval_cli;
mod eval_scores;
mod fuzz;
mod hostile;
mod hostile_outputs;
mod layers;
mod layout;
mod library;
mod lowdim;
mod mixed;
mod pe;
mod privacy_loss;
mod private_bounds;
mod psmm;
mod saved_release;
mod seeded_runs;
mod stream;
mod synth_end_to_end;
