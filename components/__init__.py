"""The app's parts: the UI (views/) and serving in public (serving/)."""
