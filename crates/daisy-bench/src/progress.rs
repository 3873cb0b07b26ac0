//! Progress bars on stderr (hidden when stderr is not a terminal).

pub use indicatif::ProgressBar;
use indicatif::ProgressStyle;

pub fn bar(len: u64, unit: &str) -> ProgressBar {
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {unit} (eta {{eta}})"
        ))
        .unwrap(),
    );
    b
}

/// A bar of benchmark stages that shows which stage runs (`set_message`).
pub fn stages(len: u64) -> ProgressBar {
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} stages (eta {eta}) {msg}",
        )
        .unwrap(),
    );
    b
}

/// A bar that never draws (machine-readable output).
pub fn hidden() -> ProgressBar {
    ProgressBar::hidden()
}
