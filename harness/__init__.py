"""The benchmark's harness: settings -> run -> raw JSON under results/ -> RESULTS.md."""
