"""Everything that turns stored runs and diagnoses into text: cells, the report, JSON, NL, CSV, markdown. No SQL, no rules."""
