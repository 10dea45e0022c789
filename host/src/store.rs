//! (being written for issue 3: see ARCHITECTURE.md)
