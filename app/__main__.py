"""``python -m app``: start F²TTA Studio."""

from app.main import main

raise SystemExit(main())
