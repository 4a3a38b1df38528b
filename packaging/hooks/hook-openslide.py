"""openslide-python: ``openslide.lowlevel`` imports ``openslide_bin`` inside a ``try`` (invisible to the
import analysis) and falls back to a system OpenSlide; the bundle always carries openslide-bin's."""

hiddenimports = ["openslide_bin"]
