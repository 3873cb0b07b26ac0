//! The report's content as one small document tree: headings, paragraphs, lists, notes,
//! tables, figures and the scoreboard. [`super::markdown`] and [`super::html`] render the
//! same tree, so report.md and report.html cannot say different things (the charts are the
//! one thing report.md can only point at).
//!
//! Text in a block may hold `code` spans between backticks; nothing else is markup.

use super::verdicts::{Counts, Status};
use crate::table::Table;

/// One block of the report.
#[derive(Clone, Debug)]
pub(super) enum Block {
    /// The page's title (one per document).
    Title(String),
    /// A section (level 2) or subsection (level 3) heading.
    Heading(u8, String),
    Para(String),
    List(Vec<String>),
    /// Small print under a table or figure: a legend, a caveat.
    Note(String),
    Table(Table),
    /// The scoreboard: a table whose column `badge` holds each row's verdict.
    Scoreboard {
        table: Table,
        badge: usize,
    },
    /// How many verdicts say PASS, TIE, FAIL and NOT RUN.
    Counts(Counts),
    /// The verdicts' long explanations, each with its status.
    Verdicts(Vec<(Status, String)>),
    /// A chart (SVG), or why it was not drawn; report.md shows the caption only.
    Figure {
        number: usize,
        caption: String,
        svg: Result<String, String>,
    },
    /// Terms and what they mean.
    Glossary(Vec<(String, String)>),
}

/// The whole report.
#[derive(Clone, Debug, Default)]
pub(super) struct Doc {
    pub blocks: Vec<Block>,
    figures: usize,
}

impl Doc {
    pub fn title(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Title(t.into()));
    }
    pub fn h2(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Heading(2, t.into()));
    }
    pub fn h3(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Heading(3, t.into()));
    }
    pub fn para(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Para(t.into()));
    }
    /// A list; nothing when `items` is empty.
    pub fn list(&mut self, items: impl IntoIterator<Item = String>) {
        let items: Vec<String> = items.into_iter().collect();
        if !items.is_empty() {
            self.blocks.push(Block::List(items));
        }
    }
    pub fn note(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Note(t.into()));
    }
    pub fn table(&mut self, t: &Table) {
        self.blocks.push(Block::Table(t.clone()));
    }
    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }
    /// A chart with its caption, numbered in order.
    pub fn figure(&mut self, caption: impl Into<String>, svg: anyhow::Result<String>) {
        self.figures += 1;
        self.blocks.push(Block::Figure {
            number: self.figures,
            caption: caption.into(),
            svg: svg.map_err(|e| format!("{e:#}")),
        });
    }

    /// Every piece of text a reader sees, in order: headings, paragraphs, list items, notes,
    /// table cells, figure captions, glossary entries, verdicts. Both renderings must show
    /// each of them (the parity test reads them back from both files).
    #[cfg(test)]
    pub fn texts(&self) -> Vec<String> {
        let mut out = vec![];
        let table = |t: &Table, out: &mut Vec<String>| {
            out.extend(t.header.iter().cloned());
            out.extend(t.rows.iter().flatten().cloned());
            out.extend(t.total.iter().flatten().cloned());
        };
        for b in &self.blocks {
            match b {
                Block::Title(t) | Block::Heading(_, t) | Block::Para(t) | Block::Note(t) => {
                    out.push(t.clone())
                }
                Block::List(items) => out.extend(items.iter().cloned()),
                Block::Table(t) | Block::Scoreboard { table: t, .. } => table(t, &mut out),
                Block::Counts(c) => out.extend(c.text().split(", ").map(String::from)),
                Block::Verdicts(v) => out.extend(v.iter().map(|(_, t)| t.clone())),
                Block::Figure {
                    number, caption, ..
                } => out.push(format!("Figure {number}: {caption}")),
                Block::Glossary(g) => {
                    for (term, def) in g {
                        out.push(term.clone());
                        out.push(def.clone());
                    }
                }
            }
        }
        out.retain(|t| !t.trim().is_empty());
        out
    }
}
