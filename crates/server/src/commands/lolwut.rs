//! LOLWUT [VERSION v [columns squares-per-row squares-per-column]]: some computer art and
//! the Redis version, as Redis answers it. For 7.0 (no VERSION) that is the version line
//! alone; VERSION 5 and 6 draw: here, rows of squares that fall into more disorder the
//! lower they are (after Georg Nees' plotter drawing Schotter, 1968), in Braille
//! characters (2x4 dots each). The drawing is Latch's own; the version line is Redis'.

use bytes::Bytes;

use super::{err, is, parse_i64, Ctx};
use crate::spec::{flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "lolwut",
    group: Group::Server,
    summary: "Displays computer art and the Redis version",
    since: "5.0.0",
    complexity: "",
    arity: -1,
    flags: flag::READONLY | flag::FAST,
    arguments: &[Arg::integer("version").with_token("VERSION").optional()],
    handler: Some(lolwut),
    ..CommandSpec::BASE
}];

/// Redis' bounds on the drawing's size, so LOLWUT stays cheap.
const MAX_COLUMNS: i64 = 1000;
const MAX_SQUARES: i64 = 200;

fn lolwut(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut version = 7;
    let mut rest = &args[1..];
    if args.len() >= 3 && is(&args[1], "VERSION") {
        let Some(asked) = parse_i64(&args[2]) else {
            ctx.reply.error(err::NOT_INTEGER);
            return;
        };
        version = asked;
        rest = &args[3..];
    }
    let line = format!("Redis ver. {}\n", crate::scripting::sandbox::REDIS_VERSION);
    if version != 5 && version != 6 {
        ctx.reply.verbatim(b"txt", line.as_bytes());
        return;
    }
    let mut sizes = [66, 8, 12];
    for (size, arg) in sizes.iter_mut().zip(rest) {
        let Some(n) = parse_i64(arg) else {
            ctx.reply.error(err::NOT_INTEGER);
            return;
        };
        *size = n;
    }
    let columns = sizes[0].clamp(1, MAX_COLUMNS) as usize;
    let per_row = sizes[1].clamp(1, MAX_SQUARES) as usize;
    let per_column = sizes[2].clamp(1, MAX_SQUARES) as usize;
    let mut text = draw_squares(columns, per_row, per_column);
    text.push_str("\nSquares falling into disorder, after Georg Nees' Schotter (1968). ");
    text.push_str(&line);
    ctx.reply.verbatim(b"txt", text.as_bytes());
}

/// A dot canvas rendered as Braille characters.
struct Canvas {
    width: usize,
    height: usize,
    dots: Vec<bool>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            dots: vec![false; width * height],
        }
    }

    fn set(&mut self, x: i64, y: i64) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            self.dots[y as usize * self.width + x as usize] = true;
        }
    }

    /// A straight line between two points, one dot per step along the longer axis.
    fn line(&mut self, from: (f64, f64), to: (f64, f64)) {
        let steps = (to.0 - from.0)
            .abs()
            .max((to.1 - from.1).abs())
            .ceil()
            .max(1.0);
        for step in 0..=steps as i64 {
            let t = step as f64 / steps;
            let x = from.0 + (to.0 - from.0) * t;
            let y = from.1 + (to.1 - from.1) * t;
            self.set(x.round() as i64, y.round() as i64);
        }
    }

    /// Each 2x4 block of dots as one Braille character, rows ending in a newline.
    fn render(&self) -> String {
        // The bit of each dot of a cell, by (column, row).
        const BITS: [[u32; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];
        let mut out = String::new();
        for top in (0..self.height).step_by(4) {
            for left in (0..self.width).step_by(2) {
                let mut bits = 0;
                for (dx, column) in BITS.iter().enumerate() {
                    for (dy, bit) in column.iter().enumerate() {
                        let (x, y) = (left + dx, top + dy);
                        if x < self.width && y < self.height && self.dots[y * self.width + x] {
                            bits |= bit;
                        }
                    }
                }
                out.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            }
            out.push('\n');
        }
        out
    }
}

fn draw_squares(columns: usize, per_row: usize, per_column: usize) -> String {
    let width = columns * 2;
    let side = (width / per_row).max(1);
    let height = side * per_column;
    let mut canvas = Canvas::new(width, height);
    // A fixed seed: the same arguments draw the same picture.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let half = side as f64 * 0.45;
    for row in 0..per_column {
        let disorder = row as f64 / per_column as f64;
        for column in 0..per_row {
            let angle = random() * disorder * std::f64::consts::FRAC_PI_4;
            let shift_x = random() * disorder * side as f64 / 3.0;
            let shift_y = random() * disorder * side as f64 / 3.0;
            let center = (
                (column * side) as f64 + side as f64 / 2.0 + shift_x,
                (row * side) as f64 + side as f64 / 2.0 + shift_y,
            );
            let corner = |dx: f64, dy: f64| {
                let (sin, cos) = angle.sin_cos();
                (
                    center.0 + dx * cos - dy * sin,
                    center.1 + dx * sin + dy * cos,
                )
            };
            let corners = [
                corner(-half, -half),
                corner(half, -half),
                corner(half, half),
                corner(-half, half),
            ];
            for index in 0..4 {
                canvas.line(corners[index], corners[(index + 1) % 4]);
            }
        }
    }
    canvas.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drawing_has_the_asked_size_and_squares() {
        let text = draw_squares(20, 4, 3);
        let lines: Vec<&str> = text.lines().collect();
        // 40 dots wide: squares of 10 dots, 30 dots high, 8 rows of 4 dots (the last part).
        assert_eq!(lines.len(), 8);
        assert!(lines.iter().all(|line| line.chars().count() == 20));
        assert!(text.chars().any(|c| c != '\u{2800}' && c != '\n'));
        // The top row is in order: the same picture as any other first row of squares.
        assert_eq!(draw_squares(20, 4, 3), text);
    }
}
