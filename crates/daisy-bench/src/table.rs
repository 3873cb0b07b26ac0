//! One typed table model for every table the lab prints or writes: built once from the
//! measurements, rendered to Markdown (report.md), to HTML (report.html) and to text (the
//! terminal, with comfy-table).

use comfy_table::{presets, CellAlignment};
use std::fmt::Write as _;

/// How a column's cells line up in text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Align {
    /// Names.
    Left,
    /// Numbers.
    #[default]
    Right,
}

/// A table: a header, rows of cells already formatted, and an optional total row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// A last row that sums the others up (its first cell is its label, set in bold).
    pub total: Option<Vec<String>>,
    /// Each column's alignment in text ([`Align::Right`] for the columns not given).
    pub align: Vec<Align>,
    /// The rows before which text leaves a blank line (groups of rows).
    pub breaks: Vec<usize>,
}

impl Table {
    /// A table with these column names and no rows yet.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            ..Table::default()
        }
    }

    /// Add a row.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Align these columns to the left in text (the others to the right).
    pub fn left(mut self, columns: &[usize]) -> Table {
        self.align = (0..self.header.len())
            .map(|c| {
                if columns.contains(&c) {
                    Align::Left
                } else {
                    Align::Right
                }
            })
            .collect();
        self
    }

    /// In text, leave a blank line before the next row (when there are rows already).
    pub fn gap(&mut self) {
        if !self.rows.is_empty() {
            self.breaks.push(self.rows.len());
        }
    }

    /// Set the total row.
    pub fn total<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.total = Some(cells.into_iter().map(Into::into).collect());
    }

    /// The table as text for the terminal: no borders (greppable lines, the first column at
    /// the start of its line), columns one space apart, a blank line between groups; every
    /// line ends with a newline.
    pub fn text(&self) -> String {
        let mut t = comfy_table::Table::new();
        t.load_preset(presets::NOTHING);
        t.set_header(&self.header);
        let blank = vec![String::new(); self.header.len()];
        for (i, r) in self.rows.iter().enumerate() {
            if self.breaks.contains(&i) {
                t.add_row(&blank);
            }
            t.add_row(r);
        }
        if let Some(total) = &self.total {
            t.add_row(total);
        }
        for (i, c) in t.column_iter_mut().enumerate() {
            c.set_padding((0, 1));
            c.set_cell_alignment(match self.align.get(i).copied().unwrap_or_default() {
                Align::Left => CellAlignment::Left,
                Align::Right => CellAlignment::Right,
            });
        }
        let mut s = t.trim_fmt();
        s.push('\n');
        s
    }

    /// The table in Markdown: `| a | b |` lines, the header's followed by `|---|---|`; every
    /// line ends with a newline.
    pub fn markdown(&self) -> String {
        // A pipe in a cell would end it: escaped.
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut s = line(&self.header);
        s += &format!("|{}\n", "---|".repeat(self.header.len()));
        for r in &self.rows {
            s += &line(r);
        }
        if let Some(t) = &self.total {
            let mut t = t.clone();
            if let Some(label) = t.first_mut() {
                *label = format!("**{label}**");
            }
            s += &line(&t);
        }
        s
    }

    /// The table in HTML: `<table>`, one `<tr>` a line (`<th>` cells for the header), text
    /// escaped; the total row's label in bold.
    pub fn html(&self) -> String {
        let mut s = String::from("<table>\n");
        let numeric = self.numeric_columns();
        let mut line = |tag: &str, cells: &[String], bold_first: bool, gap: bool| {
            s.push_str(if gap { "<tr class=\"gap\">" } else { "<tr>" });
            for (i, c) in cells.iter().enumerate() {
                let c = esc(c.trim());
                let open = if numeric.get(i).copied().unwrap_or(false) {
                    format!("<{tag} class=\"n\">")
                } else {
                    format!("<{tag}>")
                };
                let _ = if bold_first && i == 0 {
                    write!(s, "{open}<strong>{c}</strong></{tag}>")
                } else {
                    write!(s, "{open}{c}</{tag}>")
                };
            }
            s.push_str("</tr>\n");
        };
        line("th", &self.header, false, false);
        for (i, r) in self.rows.iter().enumerate() {
            // A new group of rows gets a rule above it (the page's CSS).
            line("td", r, false, self.breaks.contains(&i));
        }
        if let Some(t) = &self.total {
            line("td", t, true, false);
        }
        s.push_str("</table>\n");
        s
    }
}

impl Table {
    /// The columns whose cells are figures (a digit first, after a `~` or `-`; `-` alone
    /// for none): right-aligned in HTML so that their digits line up.
    fn numeric_columns(&self) -> Vec<bool> {
        let figure = |c: &str| {
            let c = c.trim().trim_start_matches(['~', '-']);
            c.chars().next().is_some_and(|ch| ch.is_ascii_digit())
        };
        (0..self.header.len())
            .map(|i| {
                let cells: Vec<&str> = self
                    .rows
                    .iter()
                    .filter_map(|r| r.get(i).map(|c| c.trim()))
                    .filter(|c| !c.is_empty() && *c != "-")
                    .collect();
                !cells.is_empty() && cells.iter().all(|c| figure(c))
            })
            .collect()
    }
}

/// Milliseconds with at least three significant digits.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{ms:.0}")
    } else if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// A number with `prec` decimals and its thousands separated by commas: `1,234,567.8`.
pub fn grouped(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let s = format!("{:.prec$}", v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// Text escaped for HTML.
pub fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::Table;

    fn sample() -> Table {
        let mut t = Table::new(["name", "n"]);
        t.row(["a<b", "1|2"]);
        t.row(["c", ""]);
        t.total(["all", "1"]);
        t
    }

    #[test]
    fn text_aligns_columns_and_separates_groups() {
        let mut t = Table::new(["test", "N", "server"]).left(&[0, 2]);
        t.row(["SET", "1000", "daisy"]);
        t.row(["SET", "1000", "redis-none"]);
        t.gap();
        t.row(["GET", "100000", "daisy"]);
        assert_eq!(
            t.text(),
            "test      N server\n\
             SET    1000 daisy\n\
             SET    1000 redis-none\n\
             \n\
             GET  100000 daisy\n"
        );
    }

    #[test]
    fn grouped_numbers_separate_thousands() {
        use super::grouped;
        assert_eq!(grouped(1234567.0, 0), "1,234,567");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(1000.0, 0), "1,000");
        assert_eq!(grouped(12345.678, 1), "12,345.7");
        assert_eq!(grouped(-1234.0, 0), "-1,234");
        assert_eq!(grouped(0.25, 2), "0.25");
    }

    #[test]
    fn markdown_and_html_render_the_same_cells() {
        let t = sample();
        assert_eq!(
            t.markdown(),
            "| name | n |\n|---|---|\n| a<b | 1\\|2 |\n| c |  |\n| **all** | 1 |\n"
        );
        assert_eq!(
            t.clone().left(&[0]).text(),
            "name   n\na<b  1|2\nc\nall    1\n"
        );
        assert_eq!(
            t.html(),
            "<table>\n<tr><th>name</th><th class=\"n\">n</th></tr>\n<tr><td>a&lt;b</td>\
             <td class=\"n\">1|2</td></tr>\n<tr><td>c</td><td class=\"n\"></td></tr>\n\
             <tr><td><strong>all</strong></td><td class=\"n\">1</td></tr>\n</table>\n"
        );
    }
}
