//! The Lua libraries Redis loads into its scripting VM besides Lua's own: `cjson`,
//! `cmsgpack`, `bit` and `struct`. Each file registers one global table.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::Lua;

/// Registers every library as a global of `lua`.
pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    bit::register(lua)?;
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    structlib::register(lua)?;
    Ok(())
}
