//! `loci`: the command-line interface, a thin layer over the library (see `cli/`).

mod cli;

/// A bulk load allocates and frees millions of small records (event assertions, edge
/// records, index keys); under glibc's malloc that was a seventh of the ingest, and the
/// open's decode was a third slower. The library leaves the allocator to the program that
/// embeds it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
