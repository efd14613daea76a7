"""A synthetic class, to show and measure what class grading does: solved, blank, planted
mistakes, broken and hostile submissions (``make grade-class``). Not used by production grading."""
