//! End-to-end tests: real git repositories built with the `git` command, the real binary.
//! One test binary; each module is one feature.

mod support;
