//! The report page as a list of blocks, rendered twice: self-contained HTML (plots inline) and Markdown
//! (plots as files beside it). Building the content once keeps the two in step.

use std::fmt::Write;

use super::svg::escape;

/// How a table cell stands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Plain,
    /// The best value of its row (several synthetic tables).
    Best,
    /// The largest error of its kind (worst column, worst pair).
    Worst,
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub text: String,
    pub mark: Mark,
}

impl Cell {
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell { text: text.into(), mark: Mark::Plain }
    }

    pub fn marked(text: impl Into<String>, mark: Mark) -> Cell {
        Cell { text: text.into(), mark }
    }
}

/// A table: a header row and rows of cells. The first column is a label and may wrap; the others are
/// values and stay on one line.
#[derive(Clone, Debug)]
pub struct Grid {
    pub head: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Column positions of free text that may wrap (besides the first).
    pub wrapping: Vec<usize>,
}

/// A plot: its file beside the Markdown page, its caption, its SVG text.
#[derive(Clone, Debug)]
pub struct Figure {
    pub file: String,
    pub caption: String,
    pub svg: String,
    /// Drawn with a red frame: the worst column or pair.
    pub highlight: bool,
}

#[derive(Clone, Debug)]
pub enum Block {
    Heading(String),
    Text(String),
    Warning(String),
    Table(Grid),
    Figures(Vec<Figure>),
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:15px;line-height:1.45;\
max-width:1240px;margin:1.5em auto;padding:0 1em;color:#222}h1{font-size:1.6em;margin-bottom:.3em}\
h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
table{border-collapse:collapse;margin:.8em 0;font-variant-numeric:tabular-nums}\
td,th{border:1px solid #d4d4d4;padding:4px 9px;text-align:right;white-space:pre-line;vertical-align:top}\
th{background:#f3f3f3;white-space:normal}td:first-child,th:first-child{text-align:left}td.wrap{white-space:normal;text-align:left;\
min-width:18em;max-width:30em;color:#444;font-size:92%}td.best{background:#dff1dc;font-weight:600}\
td.worst{background:#fbdcd8;font-weight:600}.warn{background:#fff3cd;border-left:4px solid #e0a800;\
padding:.5em 1em;margin:.6em 0}.private{background:#f8d7da;border-left:4px solid #c0392b;padding:.5em 1em}\
figure{display:inline-block;margin:.6em .6em .6em 0;vertical-align:top;border:1px solid #e4e4e4;padding:4px}\
figure.worst{border:3px solid #e45756}figcaption{font-size:90%;color:#555;max-width:590px}";

fn html_table(html: &mut String, grid: &Grid) {
    html.push_str("<table><tr>");
    for head in &grid.head {
        let _ = write!(html, "<th>{}</th>", escape(head));
    }
    html.push_str("</tr>\n");
    for row in &grid.rows {
        html.push_str("<tr>");
        for (position, cell) in row.iter().enumerate() {
            let mut classes = Vec::new();
            if grid.wrapping.contains(&position) {
                classes.push("wrap");
            }
            match cell.mark {
                Mark::Best => classes.push("best"),
                Mark::Worst => classes.push("worst"),
                Mark::Plain => {}
            }
            if classes.is_empty() {
                let _ = write!(html, "<td>{}</td>", escape(&cell.text));
            } else {
                let _ = write!(html, "<td class=\"{}\">{}</td>", classes.join(" "), escape(&cell.text));
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
}

/// The page as one self-contained HTML file. `warning` is shown first, in red.
pub fn html(title: &str, warning: &str, blocks: &[Block]) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title>\n\
         <style>{STYLE}</style></head><body>\n<h1>{0}</h1>\n<p class=\"private\">{1}</p>\n",
        escape(title),
        escape(warning)
    );
    for block in blocks {
        match block {
            Block::Heading(text) => {
                let _ = writeln!(html, "<h2>{}</h2>", escape(text));
            }
            Block::Text(text) => {
                let _ = writeln!(html, "<p>{}</p>", escape(text));
            }
            Block::Warning(text) => {
                let _ = writeln!(html, "<p class=\"warn\">{}</p>", escape(text));
            }
            Block::Table(grid) => html_table(&mut html, grid),
            Block::Figures(figures) => {
                for figure in figures {
                    let _ = writeln!(
                        html,
                        "<figure{}>{}<figcaption>{} (<a href=\"{}\">SVG</a>)</figcaption></figure>",
                        if figure.highlight { " class=\"worst\"" } else { "" },
                        figure.svg,
                        escape(&figure.caption),
                        escape(&figure.file)
                    );
                }
            }
        }
    }
    html.push_str("<p>All numbers: <a href=\"eval.json\">eval.json</a>.</p>\n</body></html>\n");
    html
}

fn markdown_text(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The page as Markdown; plots are linked files, marked cells are bold.
pub fn markdown(title: &str, warning: &str, blocks: &[Block]) -> String {
    let mut md = format!("# {title}\n\n> {warning}\n\n");
    for block in blocks {
        match block {
            Block::Heading(text) => {
                let _ = writeln!(md, "## {text}\n");
            }
            Block::Text(text) => {
                let _ = writeln!(md, "{text}\n");
            }
            Block::Warning(text) => {
                let _ = writeln!(md, "> **Warning.** {text}\n");
            }
            Block::Table(grid) => {
                let _ = writeln!(
                    md,
                    "| {} |",
                    grid.head.iter().map(|head| markdown_text(head)).collect::<Vec<_>>().join(" | ")
                );
                let _ = writeln!(md, "|{}", "---|".repeat(grid.head.len()));
                for row in &grid.rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|cell| match cell.mark {
                            Mark::Plain => markdown_text(&cell.text),
                            Mark::Best | Mark::Worst => {
                                format!("**{}**", markdown_text(&cell.text))
                            }
                        })
                        .collect();
                    let _ = writeln!(md, "| {} |", cells.join(" | "));
                }
                md.push('\n');
            }
            Block::Figures(figures) => {
                for figure in figures {
                    let _ = writeln!(
                        md,
                        "![{}]({})\n\n*{}*\n",
                        figure.caption.replace(['[', ']'], ""),
                        figure.file,
                        figure.caption
                    );
                }
            }
        }
    }
    md += "All numbers: [eval.json](eval.json).\n";
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_renderings_carry_every_block_and_escape_text() {
        let blocks = vec![
            Block::Heading("Numbers".into()),
            Block::Text("a < b".into()),
            Block::Warning("careful".into()),
            Block::Table(Grid {
                head: vec!["name".into(), "value".into()],
                rows: vec![vec![Cell::plain("x|y"), Cell::marked("0.1", Mark::Best)]],
                wrapping: vec![],
            }),
            Block::Figures(vec![Figure {
                file: "a.svg".into(),
                caption: "a [plot]".into(),
                svg: "<svg></svg>".into(),
                highlight: true,
            }]),
        ];
        let html = html("T", "private", &blocks);
        assert!(html.contains("<h2>Numbers</h2>") && html.contains("a &lt; b"));
        assert!(html.contains("<td class=\"best\">0.1</td>") && html.contains("<figure class=\"worst\"><svg>"));
        let md = markdown("T", "private", &blocks);
        assert!(md.contains("| x\\|y | **0.1** |") && md.contains("![a plot](a.svg)"));
        assert!(md.contains("> **Warning.** careful"));
    }
}
