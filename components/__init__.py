"""The app's parts: the UI (tabs/, render/, wiring/) and serving in public (serving/)."""
