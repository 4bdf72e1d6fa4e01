#!/usr/bin/env Rscript
# Reference values for tests/test_stats_task_level_r.py: the crossed seed x item layout of one contrast's
# paired per-item differences, fitted by lme4 with lmerTest's Satterthwaite df.
#
#   Rscript tests/data/task_level_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/task_level_fixture.csv -> tests/data/task_level_reference.json (beside this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-lme4 r-cran-lmertest r-cran-jsonlite
#
# Model (freezestats.stats.items.task_level.crossed_contrast): D_si = delta + u_s + w_i + e_si, per case
#   lmerTest::lmer(d ~ 1 + (1 | seed) + (1 | item), REML = TRUE)
# The intercept's estimate, SE and Satterthwaite df (summary(fit)$coefficients), the variance components and
# isSingular. For balanced data with every component inside its range this is the ANOVA (method of moments)
# estimate crossed_contrast computes; with a component at 0 the two differ by design (see the test).

suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "task_level_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "task_level_reference.json")

table <- read.csv(fixture)
cases <- list()
for (case in unique(table$case)) {
  d <- table[table$case == case, ]
  d$seed <- factor(d$seed)
  d$item <- factor(d$item)
  fit <- lmerTest::lmer(d ~ 1 + (1 | seed) + (1 | item), data = d, REML = TRUE)
  coefs <- summary(fit)$coefficients
  components <- as.data.frame(VarCorr(fit))
  variance <- setNames(as.list(components$vcov), components$grp)
  cases[[case]] <- list(
    n_seeds = nlevels(d$seed),
    n_items = nlevels(d$item),
    estimate = unname(coefs["(Intercept)", "Estimate"]),
    se = unname(coefs["(Intercept)", "Std. Error"]),
    df = unname(coefs["(Intercept)", "df"]),
    var_seed = variance$seed,
    var_item = variance$item,
    var_residual = variance$Residual,
    is_singular = isSingular(fit),
    REML = as.numeric(REMLcrit(fit))
  )
}

result <- list(
  r_version = R.version.string,
  lme4_version = as.character(packageVersion("lme4")),
  lmerTest_version = as.character(packageVersion("lmerTest")),
  model = "lmerTest::lmer(d ~ 1 + (1 | seed) + (1 | item), REML = TRUE); Satterthwaite df",
  cases = cases
)
writeLines(toJSON(result, digits = NA, pretty = TRUE, auto_unbox = TRUE), output)
