//! Progress bars on stderr (indicatif), only when stderr is a terminal and
//! `--quiet` is not given.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Makes progress bars, or hidden ones.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    visible: bool,
}

impl Progress {
    /// Visible when stderr is a terminal and not `quiet`.
    pub fn new(quiet: bool) -> Progress {
        Progress {
            visible: !quiet && std::io::stderr().is_terminal(),
        }
    }

    /// Never drawn (tests, library use).
    #[cfg(test)]
    pub fn hidden() -> Progress {
        Progress { visible: false }
    }

    /// A bar of `len` units.
    pub fn bar(&self, what: &str, len: u64) -> ProgressBar {
        if !self.visible {
            return ProgressBar::hidden();
        }
        let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template(
                "{msg:>24} [{bar:40}] {percent:>3}% {elapsed_precise} (eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b.set_message(what.to_string());
        b
    }

    /// A spinner for a step of unknown length.
    pub fn spinner(&self, what: &str) -> ProgressBar {
        if !self.visible {
            return ProgressBar::hidden();
        }
        let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{msg:>24} {spinner} {elapsed_precise}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b.set_message(what.to_string());
        b.enable_steady_tick(Duration::from_millis(120));
        b
    }
}
