//! Plots, PNG and SVG, with plotters. Text is drawn with DejaVu Sans,
//! embedded in the binary (plotters' `ab_glyph` feature), so plots render the
//! same on a machine with no system fonts. Font licence: font/LICENSE-DejaVu.txt.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::report::{thousands, Growth, Report};

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

const DIST_WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 190;

/// distribution.png and distribution.svg: fragment sizes, one panel per scheme.
pub fn distribution(r: &Report, dir: &Path) -> Result<(), String> {
    register_font()?;
    let size = (DIST_WIDTH, 50 + PANEL_HEIGHT * r.schemes.len() as u32);
    {
        let path = dir.join("distribution.png");
        let root = BitMapBackend::new(&path, size).into_drawing_area();
        draw_distribution(r, &root)?;
        root.present().map_err(perr)?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_distribution(r, &root)?;
        root.present().map_err(perr)?;
    }
    std::fs::write(dir.join("distribution.svg"), svg).map_err(perr)
}

fn draw_distribution<DB: DrawingBackend>(
    r: &Report,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(perr)?;
    let title = format!(
        "Keys per fragment: {} keys, {} fragments (red line: the mean, {})",
        thousands(r.keys),
        r.fragments,
        thousands(r.mean.round() as u64)
    );
    let body = root
        .titled(&title, (FAMILY, 18).into_font())
        .map_err(perr)?;
    let panels = body.split_evenly((r.schemes.len().max(1), 1));
    let top = r.schemes.iter().map(|s| s.max).max().unwrap_or(1) as f64 * 1.08;
    let n = r.fragments as f64;
    for (i, (s, area)) in r.schemes.iter().zip(panels.iter()).enumerate() {
        let caption = format!(
            "{}: stddev {} ({:.1}× floor), max/mean {:.3}",
            s.scheme,
            thousands(s.stddev.round() as u64),
            s.stddev_over_floor,
            s.max_over_mean
        );
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FAMILY, 15).into_font())
            .margin_left(10)
            .margin_right(20)
            .x_label_area_size(22)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels((n as usize).clamp(2, 10))
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .y_labels(4)
            .y_max_light_lines(0)
            .y_label_formatter(&|y| thousands(y.round().max(0.0) as u64))
            .label_style((FAMILY, 12).into_font())
            .draw()
            .map_err(perr)?;
        let c = color(i);
        let w = if n > 200.0 { 0.5 } else { 0.4 };
        chart
            .draw_series(s.counts.iter().enumerate().map(|(f, &k)| {
                let x = f as f64;
                Rectangle::new([(x - w, 0.0), (x + w, k as f64)], c.filled())
            }))
            .map_err(perr)?;
        chart
            .draw_series(LineSeries::new(
                [(-0.5, s.mean), (n - 0.5, s.mean)],
                RED.stroke_width(2),
            ))
            .map_err(perr)?;
    }
    Ok(())
}

/// growth.png and growth.svg: max/mean and stddev/floor against the fragment count.
pub fn growth(r: &Report, g: &Growth, dir: &Path) -> Result<(), String> {
    register_font()?;
    let size = (1000, 760);
    {
        let path = dir.join("growth.png");
        let root = BitMapBackend::new(&path, size).into_drawing_area();
        draw_growth(r, g, &root)?;
        root.present().map_err(perr)?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_growth(r, g, &root)?;
        root.present().map_err(perr)?;
    }
    std::fs::write(dir.join("growth.svg"), svg).map_err(perr)
}

fn draw_growth<DB: DrawingBackend>(
    r: &Report,
    g: &Growth,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(perr)?;
    let title = format!(
        "Growing a table of {} keys from 1 to {} fragments, one add at a time (exact, every step)",
        thousands(r.keys),
        g.max
    );
    let body = root
        .titled(&title, (FAMILY, 18).into_font())
        .map_err(perr)?;
    let (upper, lower) = body.split_vertically(430);
    let max_x = f64::from(g.max);
    let top = g
        .curves
        .iter()
        .flat_map(|c| c.max_over_mean.iter().copied())
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&upper)
        .caption(
            "biggest fragment / mean (1.0 = perfectly even)",
            (FAMILY, 15).into_font(),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(1f64..max_x, 0.95f64..(top * 1.05).max(1.1))
        .map_err(perr)?;
    chart
        .configure_mesh()
        .x_desc("fragments")
        .y_desc("max / mean")
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .max_light_lines(1)
        .label_style((FAMILY, 12).into_font())
        .axis_desc_style((FAMILY, 13).into_font())
        .draw()
        .map_err(perr)?;
    for (i, c) in g.curves.iter().enumerate() {
        let col = color(i);
        chart
            .draw_series(LineSeries::new(
                c.fragments
                    .iter()
                    .zip(&c.max_over_mean)
                    .map(|(&n, &y)| (f64::from(n), y)),
                col.stroke_width(2),
            ))
            .map_err(perr)?
            .label(c.scheme.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], col.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FAMILY, 13).into_font())
        .draw()
        .map_err(perr)?;

    // stddev / floor on a log scale, from 2 fragments (undefined at 1).
    let hi = g
        .curves
        .iter()
        .flat_map(|c| c.stddev_over_floor.iter().copied())
        .fold(2.0f64, f64::max);
    let mut chart = ChartBuilder::on(&lower)
        .caption(
            "stddev / binomial floor, log scale (1 = as even as chance allows)",
            (FAMILY, 15).into_font(),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(1f64..max_x, (0.3f64..hi * 1.5).log_scale())
        .map_err(perr)?;
    chart
        .configure_mesh()
        .x_desc("fragments")
        .y_desc("stddev / floor")
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .y_label_formatter(&|y| format!("{y}"))
        .max_light_lines(1)
        .label_style((FAMILY, 12).into_font())
        .axis_desc_style((FAMILY, 13).into_font())
        .draw()
        .map_err(perr)?;
    for (i, c) in g.curves.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                c.fragments
                    .iter()
                    .zip(&c.stddev_over_floor)
                    .skip(1)
                    .map(|(&n, &y)| (f64::from(n), y.max(0.3))),
                color(i).stroke_width(2),
            ))
            .map_err(perr)?;
    }
    Ok(())
}
