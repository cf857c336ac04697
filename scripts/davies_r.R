#!/usr/bin/env Rscript
# Record R's Davies test (segmented::davies.test) on the shared series, for
# tests/test_frequentist.py.  usage: Rscript scripts/davies_r.R tests/data/davies_series.csv > tests/data/davies_r.json
# The CSV has columns series, x, y; every series is tested with lm(y ~ x), k = 10, for the
# three alternatives.  Needs r-base-core and r-cran-segmented (Debian packages).
suppressPackageStartupMessages(library(segmented))
args <- commandArgs(trailingOnly = TRUE)
d <- utils::read.csv(args[1], stringsAsFactors = FALSE)
out <- c()
for (s in unique(d$series)) {
  sub <- d[d$series == s, ]
  fit <- lm(y ~ x, data = sub)
  for (alt in c("two.sided", "less", "greater")) {
    r <- davies.test(fit, ~x, k = 10, alternative = alt)
    out <- c(out, sprintf('{"series": "%s", "alternative": "%s", "p_value": %.17g, "best": %.17g, "n_points": %d}',
                          s, alt, r$p.value, unname(r$statistic), unname(r$parameter)))
  }
}
cat(sprintf('{"r_version": "%s", "segmented": "%s", "results": [\n%s\n]}\n', R.version.string,
            as.character(packageVersion("segmented")), paste(out, collapse = ",\n")))
