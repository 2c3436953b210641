//! The two plots of the evaluation page, written as plain SVG text: a column's histogram (real as bars,
//! each synthetic table as a line over them; a second, zoomed panel for skewed columns) and a pair of
//! columns' 2-D densities (real, synthetic and real − synthetic, each with a colour bar). Axes are in the
//! columns' own units.

use std::fmt::Write;

const REAL_COLOUR: &str = "#4c78a8";
/// Line colour of the k-th synthetic table (cycled).
pub const SYNTH_COLOURS: [&str; 5] = ["#e45756", "#54a24b", "#b279a2", "#f58518", "#72b7b2"];
const FONT: &str = "font-family=\"sans-serif\" font-size=\"12\"";
/// Sequential scale of the density panels, light to dark (share 0 to the largest share).
const DENSITY_STOPS: [(u8, u8, u8); 5] =
    [(247, 251, 255), (198, 219, 239), (107, 174, 214), (33, 113, 181), (8, 48, 107)];
/// Diverging scale of the difference panel: synthetic has more (red), equal (white), real has more (blue).
const DIFFERENCE_STOPS: [(u8, u8, u8); 3] = [(178, 24, 43), (247, 247, 247), (33, 102, 172)];

/// Escapes text for SVG/HTML content and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// About `target` round tick values in [lo, hi] (steps of 1, 2 or 5 times a power of ten).
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let raw = (hi - lo) / target.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|&step| step >= raw).unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A tick label: short, without float noise.
fn label(value: f64) -> String {
    let text = format!("{:.6}", value);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else if value != 0.0 && (value.abs() >= 1e6 || value.abs() < 1e-3) {
        format!("{value:.2e}")
    } else {
        text.to_string()
    }
}

/// A plotting area: pixel box and the data ranges it maps.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x: (f64, f64),
    y: (f64, f64),
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * self.width
    }

    fn py(&self, y: f64) -> f64 {
        self.top + self.height - (y - self.y.0) / (self.y.1 - self.y.0) * self.height
    }

    /// Frame, ticks and labels of both axes.
    fn axes(&self, svg: &mut String, x_label: &str, y_label: &str) {
        let bottom = self.top + self.height;
        let _ = writeln!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#888\"/>",
            self.left, self.top, self.width, self.height
        );
        for tick in ticks(self.x.0, self.x.1, 5) {
            let x = self.px(tick);
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{bottom:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#888\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" {FONT}>{}</text>",
                bottom + 4.0,
                bottom + 16.0,
                label(tick)
            );
        }
        for tick in ticks(self.y.0, self.y.1, 4) {
            let y = self.py(tick);
            let _ = writeln!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#888\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" {FONT}>{}</text>",
                self.left - 4.0,
                self.left,
                self.left - 6.0,
                y + 4.0,
                label(tick)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" {FONT}>{}</text>",
            self.left + self.width / 2.0,
            bottom + 32.0,
            escape(x_label)
        );
        let (x, y) = (self.left - 44.0, self.top + self.height / 2.0);
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 {x:.1} {y:.1})\" {FONT}>{}</text>",
            escape(y_label)
        );
    }
}

fn open(svg: &mut String, width: f64, height: f64, title: &str) {
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n\
         <title>{}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
        escape(title)
    );
}

/// One synthetic table's line in a histogram.
pub struct Series<'a> {
    pub name: &'a str,
    /// Shares of all rows per bin.
    pub shares: &'a [f64],
}

/// One panel of a histogram: equal bins over [lo, hi] (column units).
pub struct HistogramPanel<'a> {
    pub title: String,
    pub lo: f64,
    pub hi: f64,
    /// Shares of all real rows per bin.
    pub real: &'a [f64],
    pub synths: Vec<Series<'a>>,
}

/// Panel size of the histograms (pixels).
/// Two histograms with both panels fit side by side on a 1280-pixel page.
const HISTOGRAM_PANEL: (f64, f64) = (220.0, 170.0);

/// A column's histogram: one or more panels side by side (the full bounds, and a zoom for skewed columns),
/// real as bars and each synthetic table as a step line, with a legend.
pub fn histogram(column: &str, panels: &[HistogramPanel]) -> String {
    let (panel_width, panel_height) = HISTOGRAM_PANEL;
    let (left, gap, top, bottom) = (62.0, 70.0, 48.0, 44.0);
    let width = left + panels.len() as f64 * (panel_width + gap) - gap + 16.0;
    let height = top + panel_height + bottom;
    let mut svg = String::new();
    open(&mut svg, width, height, &format!("{column}: real vs synthetic"));
    for (index, panel) in panels.iter().enumerate() {
        let top_share = panel
            .real
            .iter()
            .chain(panel.synths.iter().flat_map(|series| series.shares))
            .copied()
            .fold(0.0, f64::max)
            .max(1e-12)
            * 1.05;
        let frame = Frame {
            left: left + index as f64 * (panel_width + gap),
            top,
            width: panel_width,
            height: panel_height,
            x: (panel.lo, panel.hi),
            y: (0.0, top_share),
        };
        let bins = panel.real.len().max(1);
        let bin_width = (panel.hi - panel.lo) / bins as f64;
        let edge = |i: usize| panel.lo + i as f64 * bin_width;
        for (i, &share) in panel.real.iter().enumerate().filter(|(_, &share)| share > 0.0) {
            let (x0, x1) = (frame.px(edge(i)), frame.px(edge(i + 1)));
            let (y0, y1) = (frame.py(share), frame.py(0.0));
            let _ = writeln!(
                svg,
                "<rect x=\"{x0:.2}\" y=\"{y0:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{REAL_COLOUR}\" fill-opacity=\"0.55\"/>",
                x1 - x0,
                y1 - y0
            );
        }
        for (k, series) in panel.synths.iter().enumerate() {
            let mut steps = format!("M{:.2},{:.2}", frame.px(panel.lo), frame.py(0.0));
            for (i, &share) in series.shares.iter().enumerate() {
                let _ = write!(
                    steps,
                    " L{:.2},{:.2} L{:.2},{:.2}",
                    frame.px(edge(i)),
                    frame.py(share),
                    frame.px(edge(i + 1)),
                    frame.py(share)
                );
            }
            let _ = write!(steps, " L{:.2},{:.2}", frame.px(panel.hi), frame.py(0.0));
            let _ = writeln!(
                svg,
                "<path d=\"{steps}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"/>",
                SYNTH_COLOURS[k % SYNTH_COLOURS.len()]
            );
        }
        frame.axes(&mut svg, column, if index == 0 { "share of rows" } else { "" });
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" {FONT}>{}</text>",
            frame.left,
            top - 8.0,
            escape(&panel.title)
        );
    }
    let names: Vec<&str> =
        panels.first().map(|panel| panel.synths.iter().map(|series| series.name).collect()).unwrap_or_default();
    legend(&mut svg, left, 16.0, &names);
    svg += "</svg>\n";
    svg
}

/// "real" as a bar swatch, then each synthetic table as a line swatch, in one row.
fn legend(svg: &mut String, x: f64, y: f64, synths: &[&str]) {
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{REAL_COLOUR}\" fill-opacity=\"0.55\"/>\
         <text x=\"{:.1}\" y=\"{y:.1}\" {FONT}>real</text>",
        y - 9.0,
        x + 16.0
    );
    let mut at = x + 60.0;
    for (k, name) in synths.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<line x1=\"{at:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"1.8\"/>\
             <text x=\"{:.1}\" y=\"{y:.1}\" {FONT}>{}</text>",
            y - 4.0,
            at + 14.0,
            y - 4.0,
            SYNTH_COLOURS[k % SYNTH_COLOURS.len()],
            at + 18.0,
            escape(name)
        );
        at += 30.0 + 6.5 * name.chars().count() as f64;
    }
}

/// An axis of a density panel: the column and the window shown (column units).
pub struct Axis<'a> {
    pub name: &'a str,
    pub lo: f64,
    pub hi: f64,
}

/// Side of a density panel (pixels).
const DENSITY_PANEL: f64 = 250.0;

fn mix(stops: &[(u8, u8, u8)], t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (stops.len() - 1) as f64;
    let i = (t.floor() as usize).min(stops.len() - 2);
    let f = t - i as f64;
    let channel = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (stops[i], stops[i + 1]);
    format!("#{:02x}{:02x}{:02x}", channel(a.0, b.0), channel(a.1, b.1), channel(a.2, b.2))
}

/// A vertical colour bar at (x, top) of the panel's height, from `lo` (bottom) to `hi`.
fn colour_bar(svg: &mut String, x: f64, top: f64, colour: impl Fn(f64) -> String, lo: f64, hi: f64, title: &str) {
    const STEPS: usize = 48;
    let step = DENSITY_PANEL / STEPS as f64;
    for i in 0..STEPS {
        let t = (i as f64 + 0.5) / STEPS as f64;
        let _ = writeln!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.2}\" width=\"12\" height=\"{:.2}\" fill=\"{}\"/>",
            top + DENSITY_PANEL - (i + 1) as f64 * step,
            step + 0.3,
            colour(t)
        );
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"12\" height=\"{DENSITY_PANEL}\" fill=\"none\" stroke=\"#888\"/>"
    );
    for (t, value) in [(0.0, lo), (0.5, 0.5 * (lo + hi)), (1.0, hi)] {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" {FONT}>{}</text>",
            x + 16.0,
            top + DENSITY_PANEL * (1.0 - t) + 4.0,
            super::format::sig(value)
        );
    }
    let _ = writeln!(svg, "<text x=\"{x:.1}\" y=\"{:.1}\" {FONT}>{}</text>", top - 6.0, escape(title));
}

/// The 2-D densities of columns (x, y) over their windows: real, synthetic, and real − synthetic, each
/// with its colour bar. `real` and `synth` are shares of all rows in `side` × `side` cells, row-major with
/// x most significant; the first two panels share one scale (shade ∝ √share, so sparse regions show).
pub fn density_panels(x: &Axis, y: &Axis, side: usize, real: &[f64], synth: &[f64], synth_name: &str) -> String {
    let panel = DENSITY_PANEL;
    // Each gap holds the colour bar (12 px) and its labels.
    let (left, gap, top) = (64.0, 120.0, 40.0);
    let (width, height) = (left + 3.0 * panel + 3.0 * gap, top + panel + 50.0);
    let top_share = real.iter().chain(synth).copied().fold(0.0, f64::max).max(1e-12);
    let difference: Vec<f64> = real.iter().zip(synth).map(|(r, s)| r - s).collect();
    let top_difference = difference.iter().map(|d| d.abs()).fold(0.0, f64::max).max(1e-12);
    let mut svg = String::new();
    let title = format!("{} vs {}: real, {synth_name}, and the difference", y.name, x.name);
    open(&mut svg, width, height, &title);
    let panels: [(String, &[f64]); 3] =
        [("real".into(), real), (synth_name.to_string(), synth), (format!("real − {synth_name}"), &difference)];
    for (index, (name, values)) in panels.iter().enumerate() {
        let frame = Frame {
            left: left + index as f64 * (panel + gap),
            top,
            width: panel,
            height: panel,
            x: (x.lo, x.hi),
            y: (y.lo, y.hi),
        };
        let cell = panel / side as f64;
        for (i, &value) in values.iter().enumerate().filter(|(_, &value)| value != 0.0) {
            let fill = if index < 2 {
                mix(&DENSITY_STOPS, (value / top_share).sqrt())
            } else {
                mix(&DIFFERENCE_STOPS, 0.5 + 0.5 * value / top_difference)
            };
            let (ix, iy) = (i / side, i % side);
            let _ = writeln!(
                svg,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{fill}\"/>",
                frame.left + ix as f64 * cell,
                frame.top + panel - (iy + 1) as f64 * cell,
                cell + 0.2,
                cell + 0.2
            );
        }
        frame.axes(&mut svg, x.name, if index == 0 { y.name } else { "" });
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" {FONT} font-weight=\"bold\">{}</text>",
            frame.left,
            top - 10.0,
            escape(name)
        );
        let bar = frame.left + panel + 12.0;
        if index < 2 {
            colour_bar(&mut svg, bar, top, |t| mix(&DENSITY_STOPS, t.sqrt()), 0.0, top_share, "share");
        } else {
            colour_bar(
                &mut svg,
                bar,
                top,
                |t| mix(&DIFFERENCE_STOPS, t),
                -top_difference,
                top_difference,
                "real has more",
            );
        }
    }
    svg += "</svg>\n";
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(-120.0, 1440.0, 5), vec![0.0, 500.0, 1000.0]);
        for (lo, hi) in [(-3.3, 7.1), (1e-6, 3e-6), (1e9, 5e9)] {
            let found = ticks(lo, hi, 5);
            assert!(found.len() >= 2 && found.len() <= 11, "{lo} {hi}: {found:?}");
            assert!(found.iter().all(|&t| t >= lo && t <= hi));
        }
        assert_eq!(label(0.6000000000000001), "0.6");
        assert_eq!(label(-0.0), "0");
        assert_eq!(label(1440.0), "1440");
    }

    #[test]
    fn plots_are_well_formed_and_escape_column_names() {
        let name = "a<b & \"c\"";
        let panel = |title: &str| HistogramPanel {
            title: title.into(),
            lo: 0.0,
            hi: 10.0,
            real: &[0.5, 0.0, 0.5],
            synths: vec![
                Series { name: "one", shares: &[0.25, 0.5, 0.25] },
                Series { name: "two", shares: &[0.0, 1.0, 0.0] },
            ],
        };
        let svg = histogram(name, &[panel("all"), panel("zoom")]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;") && !svg.contains("a<b"));
        assert_eq!(svg.matches("fill-opacity=\"0.55\"").count(), 2 * 2 + 1, "two bars per panel and the legend");
        assert_eq!(svg.matches("<path").count(), 4, "one line per table and panel");
        let (x, y) = (Axis { name, lo: 0.0, hi: 10.0 }, Axis { name: "y", lo: -1.0, hi: 1.0 });
        let svg = density_panels(&x, &y, 2, &[1.0, 0.0, 0.0, 0.0], &[0.25; 4], "synthetic");
        assert!(svg.trim_end().ends_with("</svg>"));
        // Darkest stop for the largest share, white-ish for none; the difference is symmetric.
        assert!(svg.contains("fill=\"#08306b\""));
        assert!(svg.contains("fill=\"#2166ac\"") && svg.contains("real − synthetic"));
        assert_eq!(mix(&DIFFERENCE_STOPS, 0.5), "#f7f7f7");
    }
}
