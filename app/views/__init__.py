"""Passive views: widgets that display state and emit signals for what the user asked."""
