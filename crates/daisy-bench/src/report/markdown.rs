//! report.md: the document tree ([`super::doc`]) in Markdown. The charts are in report.html;
//! here each figure is its caption.

use super::doc::{Block, Doc};
use super::verdicts::Counts;
use std::fmt::Write as _;

/// The counts, each in bold: "**16 PASS** · **2 TIE** · ...".
fn counts(c: &Counts) -> String {
    c.text()
        .split(", ")
        .map(|p| format!("**{p}**"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The Markdown report.
pub(super) fn render(doc: &Doc) -> String {
    let mut s = String::new();
    for b in &doc.blocks {
        let _ = match b {
            Block::Title(t) => writeln!(s, "# {t}\n"),
            Block::Heading(level, t) => {
                writeln!(s, "{} {t}\n", "#".repeat(usize::from(*level)))
            }
            Block::Para(t) => writeln!(s, "{t}\n"),
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(s, "- {i}");
                }
                writeln!(s)
            }
            Block::Note(t) => writeln!(s, "> {t}\n"),
            Block::Table(t) => writeln!(s, "{}", t.markdown()),
            Block::Scoreboard { table, badge } => {
                let mut t = table.clone();
                for row in &mut t.rows {
                    if let Some(c) = row.get_mut(*badge) {
                        *c = format!("**{c}**");
                    }
                }
                writeln!(s, "{}", t.markdown())
            }
            Block::Counts(c) => writeln!(s, "{}\n", counts(c)),
            Block::Verdicts(v) => {
                for (status, text) in v {
                    let _ = writeln!(s, "- **{}** {text}", status.label());
                }
                writeln!(s)
            }
            Block::Figure {
                number,
                caption,
                svg,
            } => match svg {
                Ok(_) => writeln!(s, "*Figure {number}: {caption}* (chart in report.html)\n"),
                Err(e) => writeln!(s, "*Figure {number}: {caption}* (chart not drawn: {e})\n"),
            },
            Block::Glossary(g) => {
                for (term, def) in g {
                    let _ = writeln!(s, "- **{term}**: {def}");
                }
                writeln!(s)
            }
        };
    }
    s
}
