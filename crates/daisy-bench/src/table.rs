//! One typed table model for every table the lab prints or writes: built once from the
//! measurements, rendered to Markdown (report.md), to HTML (report.html) and to text (the
//! terminal).

use std::fmt::Write as _;

/// A table: a header, rows of cells already formatted, and an optional total row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// A last row that sums the others up (its first cell is its label, set in bold).
    pub total: Option<Vec<String>>,
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

    /// Set the total row.
    pub fn total<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.total = Some(cells.into_iter().map(Into::into).collect());
    }

    /// The table in Markdown: `| a | b |` lines, the header's followed by `|---|---|`; every
    /// line ends with a newline.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
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
        let mut line = |tag: &str, cells: &[String], bold_first: bool| {
            s.push_str("<tr>");
            for (i, c) in cells.iter().enumerate() {
                let c = esc(c.trim());
                let _ = if bold_first && i == 0 {
                    write!(s, "<{tag}><strong>{c}</strong></{tag}>")
                } else {
                    write!(s, "<{tag}>{c}</{tag}>")
                };
            }
            s.push_str("</tr>\n");
        };
        line("th", &self.header, false);
        for r in &self.rows {
            line("td", r, false);
        }
        if let Some(t) = &self.total {
            line("td", t, true);
        }
        s.push_str("</table>\n");
        s
    }
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
        t.row(["a<b", "1"]);
        t.row(["c", ""]);
        t.total(["all", "1"]);
        t
    }

    #[test]
    fn markdown_and_html_render_the_same_cells() {
        let t = sample();
        assert_eq!(
            t.markdown(),
            "| name | n |\n|---|---|\n| a<b | 1 |\n| c |  |\n| **all** | 1 |\n"
        );
        assert_eq!(
            t.html(),
            "<table>\n<tr><th>name</th><th>n</th></tr>\n<tr><td>a&lt;b</td><td>1</td></tr>\n\
             <tr><td>c</td><td></td></tr>\n<tr><td><strong>all</strong></td><td>1</td></tr>\n\
             </table>\n"
        );
    }
}
