"""Judge calibration: every reference policy played, judged and scored as validators do, and
how well the judge separates honest shopping from its imitations (the run, its report, its
targets as data, and the injection experiment)."""
