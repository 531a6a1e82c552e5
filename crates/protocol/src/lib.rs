//! Latch's wire protocol (RESP2 and RESP3). Pure data transformation, no I/O.
//!
//! Module map:
//! - [`request`]: server-side, resumable parser for client requests (multibulk and inline),
//!   with Redis 7's exact protocol error texts.
//! - [`reply`]: server-side reply writer that encodes each reply type for the
//!   connection's protocol version, plus the `%.17g` double formatter.
//! - [`frame`]: a generic RESP3 value ([`Frame`]) with an incremental decoder and
//!   RESP3/RESP2 encoders, for clients, tests and scripting.

pub mod frame;
pub mod reply;
pub mod request;

pub use frame::{Frame, FrameError};
pub use reply::{format_double_g17, quoted, Reply, Resp};
pub use request::{RequestError, RequestLimits, RequestParser};
