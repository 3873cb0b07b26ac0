//! report.html: the document tree ([`super::doc`]) as one self-contained page (inline CSS and
//! SVG charts, no scripts), readable offline.

use super::doc::{Block, Doc};
use super::verdicts::{Counts, Status};
use crate::table::esc;
use std::fmt::Write as _;

const CSS: &str = "\
body{font-family:'Source Sans 3','Helvetica Neue',Arial,sans-serif;max-width:1180px;\
margin:2em auto;padding:0 1.5em;color:#1d1d1f;line-height:1.45;font-size:15px}\
h1{font-size:28px;margin-bottom:.2em}h2{font-size:21px;margin-top:1.8em;\
border-bottom:2px solid #ddd;padding-bottom:.2em}h3{font-size:17px;margin-top:1.4em}\
table{border-collapse:collapse;margin:.8em 0 1.2em;font-size:13px;\
font-variant-numeric:tabular-nums}\
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3;border-bottom:2px solid #bbb}td.n,th.n{text-align:right}\
tr:nth-child(even) td{background:#fafafa}tr.gap td{border-top:2px solid #bbb}\
table.scoreboard{font-size:14px;width:100%}\
table.scoreboard td,table.scoreboard th{text-align:left}\
table.scoreboard td:nth-child(4),table.scoreboard td:nth-child(5){white-space:nowrap}\
.badge{display:inline-block;min-width:4.2em;text-align:center;font-weight:700;\
border-radius:3px;padding:1px 6px;color:#fff;font-size:12px}\
.pass{background:#1a7f37}.tie{background:#b7791f}.fail{background:#c0262d}\
.notrun{background:#888}\
p.counts{font-size:17px}p.counts .badge{font-size:15px;margin-right:.2em}\
ul.verdicts{list-style:none;padding-left:0}\
ul.verdicts li{margin:.45em 0;display:grid;grid-template-columns:6.2em 1fr;align-items:start}\
ul.verdicts .badge{margin-top:2px;justify-self:start}\
p.note{font-size:13px;color:#555;margin-top:-.6em}\
figure{margin:1.2em 0}figcaption{font-size:13px;color:#444;margin-top:.2em}\
dl.glossary dt{font-weight:700;margin-top:.5em}dl.glossary dd{margin-left:1.5em}\
code{font-size:90%;background:#f3f3f3;padding:0 3px;border-radius:2px}";

/// Escaped text with its `code` spans in `<code>`.
fn inline(t: &str) -> String {
    let mut out = String::new();
    for (i, part) in t.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            out += &esc(part);
        }
    }
    out
}

fn class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Tie => "tie",
        Status::Fail => "fail",
        Status::NotRun => "notrun",
    }
}

fn badge(s: Status) -> String {
    format!("<span class=\"badge {}\">{}</span>", class(s), s.label())
}

/// The counts as badges: "16 PASS, 2 TIE, ...".
fn counts(c: &Counts) -> String {
    let mut parts = vec![];
    for (k, s) in [
        (c.pass, Status::Pass),
        (c.tie, Status::Tie),
        (c.fail, Status::Fail),
        (c.not_run, Status::NotRun),
    ] {
        parts.push(format!(
            "<span class=\"badge {}\">{k} {}</span>",
            class(s),
            s.label()
        ));
    }
    parts.join(" ")
}

/// A status from the scoreboard's badge cell.
fn status_of(label: &str) -> Option<Status> {
    [Status::Pass, Status::Tie, Status::Fail, Status::NotRun]
        .into_iter()
        .find(|s| s.label() == label)
}

/// The HTML report.
pub(super) fn render(doc: &Doc) -> String {
    let title = doc
        .blocks
        .iter()
        .find_map(|b| match b {
            Block::Title(t) => Some(t.as_str()),
            _ => None,
        })
        .unwrap_or("Daisy test report");
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    );
    for b in &doc.blocks {
        let _ = match b {
            Block::Title(t) => writeln!(h, "<h1>{}</h1>", inline(t)),
            Block::Heading(level, t) => writeln!(h, "<h{level}>{}</h{level}>", inline(t)),
            Block::Para(t) => writeln!(h, "<p>{}</p>", inline(t)),
            Block::List(items) => {
                let _ = writeln!(h, "<ul>");
                for i in items {
                    let _ = writeln!(h, "<li>{}</li>", inline(i));
                }
                writeln!(h, "</ul>")
            }
            Block::Note(t) => writeln!(h, "<p class=\"note\">{}</p>", inline(t)),
            Block::Table(t) => write!(h, "{}", t.html()),
            Block::Scoreboard { table, badge: col } => {
                // The table's own HTML, with the badge column's cells as badges.
                let mut html = table
                    .html()
                    .replacen("<table>", "<table class=\"scoreboard\">", 1);
                for row in &table.rows {
                    if let Some(s) = row.get(*col).and_then(|c| status_of(c)) {
                        html = html.replacen(
                            &format!("<td>{}</td></tr>", s.label()),
                            &format!("<td>{}</td></tr>", badge(s)),
                            1,
                        );
                    }
                }
                write!(h, "{html}")
            }
            Block::Counts(c) => writeln!(h, "<p class=\"counts\">{}</p>", counts(c)),
            Block::Verdicts(v) => {
                let _ = writeln!(h, "<ul class=\"verdicts\">");
                for (s, t) in v {
                    let _ = writeln!(h, "<li>{}{}</li>", badge(*s), inline(t));
                }
                writeln!(h, "</ul>")
            }
            Block::Figure {
                number,
                caption,
                svg,
            } => match svg {
                Ok(svg) => writeln!(
                    h,
                    "<figure>{svg}<figcaption>Figure {number}: {}</figcaption></figure>",
                    inline(caption)
                ),
                Err(e) => writeln!(
                    h,
                    "<figure><figcaption>Figure {number}: {} (chart not drawn: {})</figcaption>\
                     </figure>",
                    inline(caption),
                    esc(e)
                ),
            },
            Block::Glossary(g) => {
                let _ = writeln!(h, "<dl class=\"glossary\">");
                for (term, def) in g {
                    let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", inline(term), inline(def));
                }
                writeln!(h, "</dl>")
            }
        };
    }
    let _ = writeln!(h, "</body></html>");
    h
}
