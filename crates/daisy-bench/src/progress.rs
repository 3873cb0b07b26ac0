//! Progress bars on stderr (hidden when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};

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
