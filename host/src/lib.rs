//! Review Agent Gateway: a local bridge between a GitLab reviewer's browser and their machine.
//!
//! See `ARCHITECTURE.md` at the repository root for the code map.

pub mod chat;
pub mod config;
pub mod conversation;
pub mod delegation;
pub mod engine;
pub mod error;
pub mod globs;
pub mod logging;
pub mod mcp;
pub mod process;
pub mod protocol;
pub mod providers;
pub mod repo;
pub mod report;
pub mod review;
pub mod rules;
pub mod sandbox;
pub mod security;
pub mod settings;
pub mod store;
pub mod tools;
pub mod transport;
pub mod workspace;

pub use error::GatewayError;
