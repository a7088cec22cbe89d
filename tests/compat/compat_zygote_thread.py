"""A module whose import starts a thread: a zygote that imports it must refuse to fork
(tests/compat/test_compat_zygote.py)."""

from __future__ import annotations

import threading

threading.Thread(target=threading.Event().wait, daemon=True).start()
