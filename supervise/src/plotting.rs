//! What every PNG the tools draw shares (a run's curves.png and
//! memory.png, a sweep's objective.png): DejaVu Sans, embedded and
//! registered once, so no plot needs system fonts; and plotters' errors,
//! which are not `std::error::Error + Send + Sync`, as anyhow's.

/// Registers the embedded font as plotters' "sans-serif" (once per process).
pub fn register_font() {
    static FONT: std::sync::Once = std::sync::Once::new();
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            plotters::style::FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// A plotters error as an anyhow error.
pub fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
