//! Plots, PNG and SVG, with plotters. Text is drawn with DejaVu Sans,
//! embedded in the binary (plotters' `ab_glyph` feature), so plots render the
//! same on a machine with no system fonts. Font licence: font/LICENSE-DejaVu.txt.

use std::path::Path;
use std::sync::Once;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::axes::{count_axis, fragment_axis};
use super::growth::Curve;
use super::report::{keys, thousands, Growth, Report};

static FONT: &[u8] = include_bytes!("font/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut ok = true;
    ONCE.call_once(|| {
        ok = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok();
    });
    if ok {
        Ok(())
    } else {
        Err("internal error: the embedded font does not load".into())
    }
}

/// A colour per scheme, by position.
fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(214, 39, 40),   // red
        RGBColor(31, 119, 180),  // blue
        RGBColor(148, 103, 189), // purple
        RGBColor(44, 160, 44),   // green
        RGBColor(255, 127, 14),  // orange
        RGBColor(140, 86, 75),   // brown
        RGBColor(23, 190, 207),  // cyan
        RGBColor(127, 127, 127), // grey
    ];
    C[i % C.len()]
}

fn perr(e: impl std::fmt::Display) -> String {
    format!("cannot draw plot: {e}")
}

/// A figure, drawn the same on the PNG and the SVG backend.
trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Writes `NAME.png` and `NAME.svg` of `figure` into `dir`.
fn save(dir: &Path, name: &str, size: (u32, u32), figure: &impl Figure) -> Result<(), String> {
    register_font()?;
    {
        let path = dir.join(format!("{name}.png"));
        let root = BitMapBackend::new(&path, size).into_drawing_area();
        figure.draw(&root)?;
        root.present().map_err(perr)?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        figure.draw(&root)?;
        root.present().map_err(perr)?;
    }
    std::fs::write(dir.join(format!("{name}.svg")), svg).map_err(perr)
}

/// A chart on `area` with the plots' caption font and label areas (x
/// labels 38 px high, y labels `y_label_width` px wide); margins and
/// coordinates are the caller's.
fn chart_on<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    y_label_width: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, (FAMILY, 15).into_font())
        .x_label_area_size(38)
        .y_label_area_size(y_label_width);
    b
}

/// An x value as a whole number: the x axes count fragments.
fn whole(x: &f64) -> String {
    format!("{}", x.round() as i64)
}

/// The mesh of `chart` with the plots' fonts, whole-number x labels and
/// these axis descriptions; the caller sets the rest and draws it.
fn mesh<'a, 'b, DB, X, Y>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut m = chart.configure_mesh();
    m.x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&whole)
        .label_style((FAMILY, 12).into_font())
        .axis_desc_style((FAMILY, 13).into_font());
    m
}

const DIST_WIDTH: u32 = 1400;
const PANEL_HEIGHT: u32 = 230;
/// Share of a distribution row's width given to the bars; the rest shows
/// the deviations.
const BARS_SHARE: f64 = 0.6;

/// The mean as a black line: visible over every bar colour.
fn mean_line<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, impl CoordTranslate<From = (f64, f64)>>,
    n: f64,
    mean: f64,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(
            [(-0.5, mean), (n - 0.5, mean)],
            BLACK.stroke_width(2),
        ))
        .map_err(perr)?;
    Ok(())
}

/// distribution.png and distribution.svg: per scheme, the fragment sizes
/// (left) and each fragment's deviation from the mean in units of the
/// binomial floor, with the ±2 band where chance alone puts about 95% of
/// fragments (right).
pub fn distribution(r: &Report, dir: &Path) -> Result<(), String> {
    let size = (DIST_WIDTH, 60 + PANEL_HEIGHT * r.schemes.len() as u32);
    save(dir, "distribution", size, &Distribution(r))
}

struct Distribution<'a>(&'a Report);

impl Figure for Distribution<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_distribution(self.0, root)
    }
}

fn draw_distribution<DB: DrawingBackend>(
    r: &Report,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(perr)?;
    let title = format!(
        "{} into {} fragments. Left: keys per fragment, black line the mean ({}). \
         Right: (keys − mean) / binomial floor, grey band ±2",
        keys(r.keys),
        r.fragments,
        thousands(r.mean.round() as u64)
    );
    let body = root
        .titled(&title, (FAMILY, 18).into_font())
        .map_err(perr)?;
    let rows = body.split_evenly((r.schemes.len().max(1), 1));
    let top = r.schemes.iter().map(|s| s.max).max().unwrap_or(1) as f64 * 1.08;
    let n = r.fragments as f64;
    let split = (f64::from(DIST_WIDTH) * BARS_SHARE) as i32;
    for (i, (s, row)) in r.schemes.iter().zip(rows.iter()).enumerate() {
        let (left, right) = row.split_horizontally(split);
        let c = color(i);
        let w = if n > 200.0 { 0.5 } else { 0.4 };

        let caption = format!(
            "{}: stddev {} ({:.1}× floor), max/mean {:.3}",
            s.scheme,
            thousands(s.stddev.round() as u64),
            s.stddev_over_floor,
            s.max_over_mean
        );
        let mut chart = chart_on(&left, &caption, 80)
            .margin_left(10)
            .margin_right(20)
            .build_cartesian_2d(fragment_axis(r.fragments), 0f64..top)
            .map_err(perr)?;
        mesh(&mut chart, "fragment", "keys")
            .disable_x_mesh()
            .y_labels(4)
            .y_max_light_lines(0)
            .y_label_formatter(&|y| thousands(y.round().max(0.0) as u64))
            .draw()
            .map_err(perr)?;
        chart
            .draw_series(s.counts.iter().enumerate().map(|(f, &k)| {
                let x = f as f64;
                Rectangle::new([(x - w, 0.0), (x + w, k as f64)], c.filled())
            }))
            .map_err(perr)?;
        mean_line(&mut chart, n, s.mean)?;

        // Deviations in floors: a scheme at the floor scatters inside the
        // band; a scheme that placed keys identically would sit on 0.
        let z: Vec<f64> = s
            .counts
            .iter()
            .map(|&k| {
                if s.floor > 0.0 {
                    (k as f64 - s.mean) / s.floor
                } else {
                    0.0
                }
            })
            .collect();
        let lim = z.iter().fold(3.0f64, |a, &v| a.max(v.abs())) * 1.12;
        let inside = z.iter().filter(|v| v.abs() <= 2.0).count();
        let caption = format!(
            "{}: {} of {} fragments within ±2 floors ({} keys)",
            s.scheme,
            inside,
            z.len(),
            thousands(s.floor.round() as u64)
        );
        let mut chart = chart_on(&right, &caption, 60)
            .margin_left(10)
            .margin_right(20)
            .build_cartesian_2d(fragment_axis(r.fragments), -lim..lim)
            .map_err(perr)?;
        mesh(&mut chart, "fragment", "(keys − mean) / floor")
            .disable_x_mesh()
            .y_labels(5)
            .y_max_light_lines(0)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(perr)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(-0.5, -2.0), (n - 0.5, 2.0)],
                RGBColor(200, 200, 200).mix(0.6).filled(),
            )))
            .map_err(perr)?;
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 0.0), (n - 0.5, 0.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(perr)?;
        chart
            .draw_series(z.iter().enumerate().map(|(f, &v)| {
                let x = f as f64;
                Rectangle::new([(x - w, 0.0f64.min(v)), (x + w, 0.0f64.max(v))], c.filled())
            }))
            .map_err(perr)?;
    }
    Ok(())
}

/// growth.png and growth.svg: max/mean and stddev/floor against the
/// fragment count, on a log x axis (1 to 16 fragments take half the width).
pub fn growth(r: &Report, g: &Growth, dir: &Path) -> Result<(), String> {
    save(dir, "growth", (1100, 860), &GrowthFigure(r, g))
}

struct GrowthFigure<'a>(&'a Report, &'a Growth);

impl Figure for GrowthFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_growth(self.0, self.1, root)
    }
}

/// A line style per scheme, by position: solid or one of three dash
/// patterns, so that curves lying on top of each other stay apart.
fn dashes(i: usize) -> Option<(i32, i32)> {
    [None, Some((12, 5)), Some((4, 4)), Some((9, 4)), None][i % 5]
}

/// Fragment counts at which scheme `i` of `k` gets a marker: about 25 on a
/// geometric grid over 1..=max, shifted per scheme so markers of different
/// schemes do not sit on top of each other.
fn marker_counts(i: usize, k: usize, max: u32) -> Vec<u32> {
    let steps = 25.0;
    let ratio = f64::from(max).powf(1.0 / steps);
    let shift = (i as f64 + 0.5) / k.max(1) as f64;
    let mut v: Vec<u32> = (0..=steps as u32)
        .map(|s| ratio.powf(f64::from(s) + shift).round() as u32)
        .filter(|&n| (1..=max).contains(&n))
        .collect();
    v.dedup();
    v
}

/// Splits a polyline where it turns back vertically (a peak or a trough):
/// each piece turns by at most a right angle, so a thick line's mitred
/// joins stay short (at a sharp turn back they spike far out of the plot).
fn monotone_runs(pts: &[(f64, f64)]) -> Vec<&[(f64, f64)]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for j in 1..pts.len().saturating_sub(1) {
        let (a, b) = (pts[j].1 - pts[j - 1].1, pts[j + 1].1 - pts[j].1);
        if a * b < 0.0 {
            runs.push(&pts[start..=j]);
            start = j;
        }
    }
    runs.push(&pts[start..]);
    runs
}

/// Draws every curve (`value` of it, from fragment count `first`; values
/// below `floor` drawn at `floor`) with its dashes and markers, and the
/// legend (at `legend`). Curves are drawn last scheme first, so a dashed
/// curve lies over a solid one it coincides with.
fn draw_curves<'a, DB: DrawingBackend + 'a, CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'a, DB, CT>,
    g: &Growth,
    value: &dyn Fn(&Curve) -> &[f64],
    first: u32,
    floor: f64,
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    let k = g.curves.len();
    for (i, c) in g.curves.iter().enumerate().rev() {
        let col = color(i);
        let pts: Vec<(f64, f64)> = c
            .fragments
            .iter()
            .zip(value(c))
            .filter(|(&n, _)| n >= first)
            .map(|(&n, &y)| (f64::from(n), y.max(floor)))
            .collect();
        let style = col.stroke_width(2);
        match dashes(i) {
            None => {
                for run in monotone_runs(&pts) {
                    chart
                        .draw_series(LineSeries::new(run.iter().copied(), style))
                        .map_err(perr)?;
                }
            }
            // Dashes are short separate strokes: no long joins to spike.
            Some((d, gap)) => {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), d, gap, style))
                    .map_err(perr)?;
            }
        }
        let marks = marker_counts(i, k, g.max);
        let at = pts
            .iter()
            .filter(|(n, _)| marks.contains(&(*n as u32)))
            .map(|&p| EmptyElement::at(p));
        // One concrete element type per shape, as plotters needs.
        match i % 5 {
            0 => chart.draw_series(at.map(|e| e + Circle::new((0, 0), 4, col.filled()))),
            1 => chart.draw_series(at.map(|e| e + TriangleMarker::new((0, 0), 6, col.filled()))),
            2 => chart.draw_series(
                at.map(|e| e + Rectangle::new([(-4, -4), (4, 4)], col.stroke_width(2))),
            ),
            3 => chart.draw_series(at.map(|e| e + Cross::new((0, 0), 5, col.stroke_width(2)))),
            _ => chart.draw_series(at.map(|e| e + Circle::new((0, 0), 4, col.stroke_width(2)))),
        }
        .map_err(perr)?;
    }
    // The legend, in scheme order: empty series that carry only a label.
    for (i, c) in g.curves.iter().enumerate() {
        let col = color(i);
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(perr)?
            .label(c.scheme.clone())
            .legend(move |(x, y)| {
                // The legend needs one element type for every scheme: each
                // sample holds every line and shape, all but its own drawn
                // transparent.
                let (d, gap) = dashes(i).unwrap_or((1, 1));
                let solid = dashes(i).is_none();
                let own = |yes: bool, st: ShapeStyle| if yes { st } else { TRANSPARENT.into() };
                let shape = i % 5;
                let ends = vec![(-15, 0), (15, 0)];
                EmptyElement::at((x + 15, y))
                    + PathElement::new(ends.clone(), own(solid, col.stroke_width(2)))
                    + DashedPathElement::new(ends, d, gap, own(!solid, col.stroke_width(2)))
                    + Circle::new((0, 0), 4, own(shape == 0, col.filled()))
                    + TriangleMarker::new((0, 0), 6, own(shape == 1, col.filled()))
                    + Rectangle::new([(-4, -4), (4, 4)], own(shape == 2, col.stroke_width(2)))
                    + Cross::new((0, 0), 5, own(shape == 3, col.stroke_width(2)))
                    + Circle::new((0, 0), 4, own(shape == 4, col.stroke_width(2)))
            });
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .legend_area_size(40)
        .label_font((FAMILY, 13).into_font())
        .draw()
        .map_err(perr)
}

fn draw_growth<DB: DrawingBackend>(
    r: &Report,
    g: &Growth,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(perr)?;
    let title = format!(
        "Growing a table of {} from 1 to {} fragments, one add at a time (exact, every step)",
        keys(r.keys),
        g.max
    );
    let body = root
        .titled(&title, (FAMILY, 18).into_font())
        .map_err(perr)?;
    let (upper, lower) = body.split_vertically(body.dim_in_pixel().1 / 2);
    let x_axis = || count_axis(g.max);

    let top = g
        .curves
        .iter()
        .flat_map(|c| c.max_over_mean.iter().copied())
        .fold(1.0f64, f64::max);
    let mut chart = chart_on(&upper, "biggest fragment / mean (1.0 = perfectly even)", 60)
        .margin(10)
        .margin_right(25)
        .build_cartesian_2d(x_axis(), 0.95f64..(top * 1.05).max(1.1))
        .map_err(perr)?;
    mesh(&mut chart, "fragments (log scale)", "max / mean")
        .y_label_formatter(&|y| format!("{y:.2}"))
        .max_light_lines(1)
        .draw()
        .map_err(perr)?;
    // Upper left: linear's tallest teeth are on the right.
    draw_curves(
        &mut chart,
        g,
        &|c| &c.max_over_mean,
        1,
        0.0,
        SeriesLabelPosition::UpperLeft,
    )?;

    // stddev / floor on a log scale, from 2 fragments (undefined at 1).
    let hi = g
        .curves
        .iter()
        .flat_map(|c| c.stddev_over_floor.iter().copied())
        .fold(2.0f64, f64::max);
    let mut chart = chart_on(
        &lower,
        "stddev / binomial floor, log scale (1 = as even as chance allows)",
        60,
    )
    .margin(10)
    .margin_right(25)
    .build_cartesian_2d(x_axis(), (0.3f64..hi * 1.5).log_scale())
    .map_err(perr)?;
    mesh(&mut chart, "fragments (log scale)", "stddev / floor")
        .y_labels(6)
        .y_label_formatter(&|y| format!("{y}"))
        .max_light_lines(1)
        .draw()
        .map_err(perr)?;
    draw_curves(
        &mut chart,
        g,
        &|c| &c.stddev_over_floor,
        2,
        0.3,
        SeriesLabelPosition::UpperRight,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_at_every_peak_and_trough() {
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 3.0, 1.0, 1.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, &y)| (i as f64, y))
            .collect();
        let runs = monotone_runs(&pts);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0], &pts[0..=2]);
        assert_eq!(runs[1], &pts[2..]);
        assert_eq!(monotone_runs(&pts[..1]).len(), 1);
    }

    #[test]
    fn markers_of_each_scheme_stay_in_range() {
        for i in 0..5 {
            let m = marker_counts(i, 5, 400);
            assert!(
                m.len() >= 15 && m.iter().all(|&n| (1..=400).contains(&n)),
                "{m:?}"
            );
        }
        assert_ne!(marker_counts(0, 5, 400), marker_counts(1, 5, 400));
    }
}
