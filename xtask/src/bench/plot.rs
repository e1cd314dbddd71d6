//! One SVG per scenario: a panel per measured quantity, a group of bars per
//! case (median), one bar per side, with a min-max whisker.

use std::path::Path;

use plotters::prelude::*;

use super::report::{Row, SIDES, Session, median};

const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 300;
const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
];

/// Draws `scenario`'s plot to `path`.
pub fn scenario(session: &Session, scenario: &str, path: &Path) -> Result<(), String> {
    let rows: Vec<Row<'_>> = Row::of(session, scenario);
    let mut metrics: Vec<(&str, &str)> = Vec::new();
    for r in &rows {
        if !metrics.contains(&(r.metric, r.unit)) {
            metrics.push((r.metric, r.unit));
        }
    }
    if metrics.is_empty() {
        return Ok(());
    }
    let root =
        SVGBackend::new(path, (WIDTH, PANEL_HEIGHT * metrics.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((metrics.len(), 1));
    for (area, (metric, unit)) in panels.iter().zip(&metrics) {
        let rows: Vec<&Row<'_>> = rows.iter().filter(|r| r.metric == *metric).collect();
        panel(area, metric, unit, &rows)?;
    }
    root.present().map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    format!("plotting: {e}")
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    metric: &str,
    unit: &str,
    rows: &[&Row<'_>],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let top = rows
        .iter()
        .flat_map(|r| r.sides.iter().flatten())
        .flat_map(|v| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{metric} ({unit})"), ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..n, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_label_formatter(&|v| super::report::number(*v))
        .draw()
        .map_err(err)?;
    let present: Vec<usize> = (0..SIDES.len())
        .filter(|&s| rows.iter().any(|r| r.sides[s].is_some()))
        .collect();
    let width = 0.8 / present.len().max(1) as f64;
    for (slot, &side) in present.iter().enumerate() {
        let color = COLORS[side % COLORS.len()];
        let bars = rows.iter().enumerate().filter_map(|(i, r)| {
            let values = r.sides[side].as_ref()?;
            let x0 = i as f64 + 0.1 + slot as f64 * width;
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + width * 0.9, median(values))],
                color.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(SIDES[side])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        let whiskers = rows.iter().enumerate().filter_map(|(i, r)| {
            let values = r.sides[side].as_ref()?;
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let x = i as f64 + 0.1 + slot as f64 * width + width * 0.45;
            Some(PathElement::new(
                vec![(x, lo), (x, hi)],
                BLACK.stroke_width(1),
            ))
        });
        chart.draw_series(whiskers).map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    // Case names under each group, placed in pixels below the x axis.
    let base = area.get_base_pixel();
    for (i, r) in rows.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let style = TextStyle::from(("sans-serif", 12).into_font()).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ),
        );
        area.draw(&Text::new(
            r.case.to_owned(),
            (px - base.0, py - base.1 + 6),
            style,
        ))
        .map_err(err)?;
    }
    Ok(())
}
