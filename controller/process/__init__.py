"""The controller process: its settings, leader election, and the pass loop."""
