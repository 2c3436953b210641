//! The two plots of the evaluation page, written as plain SVG text: a column's histogram (real as bars,
//! synthetic as a line over them) and a pair of columns' 2-D densities (real beside synthetic, one shared
//! shade scale). Axes are in the columns' own units.

use std::fmt::Write;

use crate::geometry::bounds::ColumnBounds;

const REAL_COLOUR: &str = "#4c78a8";
const SYNTH_COLOUR: &str = "#e45756";
const FONT: &str = "font-family=\"sans-serif\" font-size=\"11\"";

/// Escapes text for SVG/HTML content and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About `target` round tick values in [lo, hi] (steps of 1, 2 or 5 times a power of ten).
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let raw = (hi - lo) / target.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * power);
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

/// Histogram of one column: `real` and `synth` are the shares of rows in equal bins over the bounds.
pub fn histogram(bounds: &ColumnBounds, real: &[f64], synth: &[f64]) -> String {
    let (width, height) = (520.0, 320.0);
    let top_share = real
        .iter()
        .chain(synth)
        .copied()
        .fold(0.0, f64::max)
        .max(1e-12)
        * 1.05;
    let frame = Frame {
        left: 64.0,
        top: 28.0,
        width: width - 64.0 - 16.0,
        height: height - 28.0 - 48.0,
        x: (bounds.lo, bounds.hi),
        y: (0.0, top_share),
    };
    let mut svg = String::new();
    let title = format!("{}: real vs synthetic", bounds.column);
    open(&mut svg, width, height, &title);
    let bins = real.len().max(1);
    let bin_width = (bounds.hi - bounds.lo) / bins as f64;
    let edge = |i: usize| bounds.lo + i as f64 * bin_width;
    for (i, &share) in real.iter().enumerate().filter(|(_, &share)| share > 0.0) {
        let (x0, x1) = (frame.px(edge(i)), frame.px(edge(i + 1)));
        let (y0, y1) = (frame.py(share), frame.py(0.0));
        let _ = writeln!(
            svg,
            "<rect x=\"{x0:.2}\" y=\"{y0:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{REAL_COLOUR}\" fill-opacity=\"0.55\"/>",
            x1 - x0,
            y1 - y0
        );
    }
    let mut steps = format!("M{:.2},{:.2}", frame.px(bounds.lo), frame.py(0.0));
    for (i, &share) in synth.iter().enumerate() {
        let _ = write!(
            steps,
            " L{:.2},{:.2} L{:.2},{:.2}",
            frame.px(edge(i)),
            frame.py(share),
            frame.px(edge(i + 1)),
            frame.py(share)
        );
    }
    let _ = write!(steps, " L{:.2},{:.2}", frame.px(bounds.hi), frame.py(0.0));
    let _ = writeln!(
        svg,
        "<path d=\"{steps}\" fill=\"none\" stroke=\"{SYNTH_COLOUR}\" stroke-width=\"1.6\"/>"
    );
    frame.axes(&mut svg, &bounds.column, "share of rows per bin");
    legend(&mut svg, frame.left + frame.width - 150.0, 16.0);
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"16\" {FONT} font-weight=\"bold\">{}</text>\n</svg>",
        frame.left,
        escape(&bounds.column)
    );
    svg
}

fn legend(svg: &mut String, x: f64, y: f64) {
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{REAL_COLOUR}\" fill-opacity=\"0.55\"/>\
         <text x=\"{:.1}\" y=\"{y:.1}\" {FONT}>real</text>\
         <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{SYNTH_COLOUR}\" stroke-width=\"1.6\"/>\
         <text x=\"{:.1}\" y=\"{y:.1}\" {FONT}>synthetic</text>",
        y - 9.0,
        x + 16.0,
        x + 60.0,
        y - 4.0,
        x + 74.0,
        y - 4.0,
        x + 78.0
    );
}

/// The 2-D densities of columns (x, y), real beside synthetic: `real` and `synth` are shares of rows in
/// `side` × `side` cells, row-major with x most significant. Shade ∝ share, one scale for both panels.
pub fn density_pair(
    x: &ColumnBounds,
    y: &ColumnBounds,
    side: usize,
    real: &[f64],
    synth: &[f64],
) -> String {
    let panel = 260.0;
    let (left, gap, top) = (64.0, 80.0, 30.0);
    let (width, height) = (left + 2.0 * panel + gap + 16.0, top + panel + 48.0);
    let top_share = real
        .iter()
        .chain(synth)
        .copied()
        .fold(0.0, f64::max)
        .max(1e-12);
    let mut svg = String::new();
    let title = format!("{} vs {}: real beside synthetic", y.column, x.column);
    open(&mut svg, width, height, &title);
    for (index, (name, shares)) in [("real", real), ("synthetic", synth)].iter().enumerate() {
        let frame = Frame {
            left: left + index as f64 * (panel + gap),
            top,
            width: panel,
            height: panel,
            x: (x.lo, x.hi),
            y: (y.lo, y.hi),
        };
        let cell = panel / side as f64;
        for (i, &share) in shares.iter().enumerate().filter(|(_, &share)| share > 0.0) {
            let (ix, iy) = (i / side, i % side);
            let _ = writeln!(
                svg,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"#1f3d7a\" fill-opacity=\"{:.3}\"/>",
                frame.left + ix as f64 * cell,
                frame.top + panel - (iy + 1) as f64 * cell,
                cell,
                cell,
                (share / top_share).sqrt()
            );
        }
        frame.axes(&mut svg, &x.column, &y.column);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"18\" {FONT} font-weight=\"bold\">{name}</text>",
            frame.left
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"18\" text-anchor=\"end\" {FONT}>shade: sqrt(share / max share)</text>\n</svg>",
        width - 16.0
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(
            ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(ticks(-120.0, 1440.0, 5), vec![0.0, 500.0, 1000.0]);
        for (lo, hi) in [(-3.3, 7.1), (1e-6, 3e-6), (1e9, 5e9)] {
            let found = ticks(lo, hi, 5);
            assert!(
                found.len() >= 2 && found.len() <= 11,
                "{lo} {hi}: {found:?}"
            );
            assert!(found.iter().all(|&t| t >= lo && t <= hi));
        }
        assert_eq!(label(0.6000000000000001), "0.6");
        assert_eq!(label(-0.0), "0");
        assert_eq!(label(1440.0), "1440");
    }

    #[test]
    fn plots_are_well_formed_and_escape_column_names() {
        let bounds = ColumnBounds::new("a<b & \"c\"", 0.0, 10.0).unwrap();
        let svg = histogram(&bounds, &[0.5, 0.0, 0.5], &[0.25, 0.5, 0.25]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;") && !svg.contains("a<b"));
        assert_eq!(
            svg.matches("fill-opacity=\"0.55\"").count(),
            2 + 1,
            "two bars and the legend"
        );
        let other = ColumnBounds::new("y", -1.0, 1.0).unwrap();
        let svg = density_pair(&bounds, &other, 2, &[1.0, 0.0, 0.0, 0.0], &[0.25; 4]);
        assert_eq!(
            svg.matches("<rect x=").count(),
            2 + 1 + 4,
            "two frames and the non-empty cells"
        );
        assert!(svg.contains("fill-opacity=\"1.000\"") && svg.contains("fill-opacity=\"0.500\""));
    }
}
