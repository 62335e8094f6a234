"""The app's UI: one module per tab (its layout and its events) and the pure renderers they share."""
