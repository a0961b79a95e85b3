//! The `telltale` binary; everything lives in the library (see `src/lib.rs`).

fn main() -> anyhow::Result<()> {
    telltale::run()
}
