//! The `telltale` binary; everything lives in the library (see `src/lib.rs`).

// jemalloc, not glibc's malloc: the scans, merges and commits allocate and free large buffers
// at a high rate, and glibc maps each one fresh from the kernel (zeroed pages: a large share
// of a profile) and fragments. Measured with scoring_run (benches/README.md): loading, compaction
// and a million-session run all faster, and half the resident memory after loading. Its options
// (background purging, a one-second decay) are compiled in from `.cargo/config.toml`.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    match telltale::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", telltale::error_report(&error));
            std::process::ExitCode::FAILURE
        }
    }
}
