fn main() {
    std::process::exit(dpsynth::cli::main());
}
