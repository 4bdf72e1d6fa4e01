#!/usr/bin/env Rscript
# Reference values for tests/test_stats_models.py and tests/test_stats_emm.py, from lme4 / lmerTest / emmeans.
#
#   Rscript tests/data/lme4_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/stats_fixture.csv -> tests/data/lme4_reference.json (next to this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-lme4 r-cran-lmertest r-cran-emmeans r-cran-jsonlite
#
# Model (the one freezestats.stats.fit_mixed fits, same treatment coding: frozen_layers = 0 and the smallest
# train_size are the reference levels):
#   best_dev ~ factor(frozen_layers) * factor(train_size) + (1 | seed), REML = TRUE
# Term names are written in patsy's spelling ("frozen_layers[T.-1]:train_size[T.100]") so the Python test can
# compare by name.

suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
  library(emmeans)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "stats_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "lme4_reference.json")

d <- read.csv(fixture)
d <- d[d$role == "grid" & d$state == "complete", ]
frozen_levels <- c(0, setdiff(sort(unique(d$frozen_layers)), 0))
d$frozen_layers <- factor(d$frozen_layers, levels = frozen_levels)
d$train_size <- factor(d$train_size, levels = sort(unique(d$train_size)))
d$seed <- factor(d$seed)

# Tight tolerances so that the comparison measures the two implementations, not the optimizers' stopping rules.
control <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhobeg = 0.1, rhoend = 1e-12, maxfun = 1e5))
full_formula <- best_dev ~ frozen_layers * train_size + (1 | seed)
fit <- lmerTest::lmer(full_formula, data = d, REML = TRUE, control = control)

patsy_term <- function(name) {
  if (name == "(Intercept)") return("Intercept")
  parts <- strsplit(name, ":", fixed = TRUE)[[1]]
  parts <- sub("^frozen_layers(.*)$", "frozen_layers[T.\\1]", parts)
  parts <- sub("^train_size(.*)$", "train_size[T.\\1]", parts)
  paste(parts, collapse = ":")
}

beta <- fixef(fit)
fixed <- data.frame(
  term = vapply(names(beta), patsy_term, ""),
  estimate = unname(beta),
  se = unname(sqrt(diag(as.matrix(vcov(fit))))),
  row.names = NULL
)

vc <- as.data.frame(VarCorr(fit))
variance_components <- data.frame(
  component = ifelse(vc$grp == "Residual", "residual", vc$grp),
  variance = vc$vcov,
  sd = vc$sdcor
)

level_of <- function(x) as.integer(as.character(x))
# emmeans labels a contrast "(frozen_layers-1) - frozen_layers0" or "frozen_layers2 - frozen_layers0".
frozen_of <- function(label) as.integer(sub("^\\(?frozen_layers(-?[0-9]+)\\)? - .*$", "\\1", as.character(label)))

emm_s <- emmeans(fit, ~ frozen_layers * train_size, lmer.df = "satterthwaite")
emm_kr <- emmeans(fit, ~ frozen_layers * train_size, lmer.df = "kenward-roger")
s <- as.data.frame(summary(emm_s))
k <- as.data.frame(summary(emm_kr))
emm <- data.frame(
  frozen_layers = level_of(s$frozen_layers),
  train_size = level_of(s$train_size),
  emmean = s$emmean,
  se = s$SE,
  df = s$df,
  ci_low = s$lower.CL,
  ci_high = s$upper.CL,
  se_kr = k$SE,
  df_kr = k$df
)

# Every frozen level minus frozen_layers = 0, within each train size.
contrast_table <- function(adjust) {
  set.seed(20200101)  # adjust = "mvt" integrates a multivariate t by randomised quadrature
  as.data.frame(summary(
    contrast(emm_s, "trt.vs.ctrl", ref = 1, by = "train_size", adjust = adjust),
    infer = c(TRUE, TRUE)
  ))
}
cn <- contrast_table("none")
ch <- contrast_table("holm")
cm <- contrast_table("mvt")
contrasts <- data.frame(
  train_size = level_of(cn$train_size),
  frozen_layers = frozen_of(cn$contrast),
  estimate = cn$estimate,
  se = cn$SE,
  df = cn$df,
  t = cn$t.ratio,
  p_val = cn$p.value,
  p_holm = ch$p.value,
  p_dunnett = cm$p.value,
  ci_low_dunnett = cm$lower.CL,
  ci_high_dunnett = cm$upper.CL
)

margin <- 0.02
eq <- as.data.frame(test(
  contrast(emm_s, "trt.vs.ctrl", ref = 1, by = "train_size", adjust = "none"),
  delta = margin, side = "equivalence", adjust = "none"
))
equivalence <- data.frame(
  train_size = level_of(eq$train_size),
  frozen_layers = frozen_of(eq$contrast),
  p_val = eq$p.value
)

full_ml <- lme4::lmer(full_formula, data = d, REML = FALSE, control = control)
reduced_ml <- lme4::lmer(best_dev ~ frozen_layers + train_size + (1 | seed), data = d, REML = FALSE, control = control)
lrt <- anova(reduced_ml, full_ml, refit = FALSE)

reference <- list(
  meta = list(
    fixture = basename(fixture),
    formula = "best_dev ~ factor(frozen_layers) * factor(train_size) + (1 | seed), REML = TRUE",
    reference_levels = "frozen_layers = 0, train_size = smallest",
    emmeans_df = "satterthwaite (se, df, ci); kenward-roger in se_kr, df_kr",
    r_version = R.version.string,
    lme4 = as.character(packageVersion("lme4")),
    lmerTest = as.character(packageVersion("lmerTest")),
    emmeans = as.character(packageVersion("emmeans"))
  ),
  reml_loglik = as.numeric(logLik(fit)),
  fixed_effects = fixed,
  variance_components = variance_components,
  emmeans = emm,
  contrasts = contrasts,
  equivalence = list(margin = margin, rows = equivalence),
  interaction_lrt = list(
    lr_stat = lrt$Chisq[2],
    df = lrt$Df[2],
    p_val = lrt[["Pr(>Chisq)"]][2],
    llf_full = as.numeric(logLik(full_ml)),
    llf_reduced = as.numeric(logLik(reduced_ml))
  )
)
write_json(reference, output, digits = NA, auto_unbox = TRUE, pretty = TRUE, dataframe = "rows")
