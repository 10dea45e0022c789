//! End-to-end tests: real git repositories built with the `git` command, the real binary.
//! One test binary; each module is one feature.

mod support;

mod analyzers;
mod bare;
mod confidence;
mod errors;
mod events;
mod exit_codes;
mod formats;
mod guards;
mod kept_lines;
mod line_endings;
mod merge_base;
mod multi_language;
mod partial_clone;
mod rebase;
mod renames;
mod rule_sources;
mod skips;
mod suppression;
mod syntax;
