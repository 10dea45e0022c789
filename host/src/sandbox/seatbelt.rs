//! The macOS rendering of a [`Policy`](super::Policy): a Seatbelt profile (SBPL) given to
//! `sandbox-exec -p` (DESIGN §11: plain data, unit-tested on Linux).
