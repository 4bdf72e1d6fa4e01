#!/usr/bin/env Rscript
# Reference values for tests/test_stats_grouped.py: freezestats' default mixed model, fitted by nlme + emmeans.
#
#   Rscript tests/data/nlme_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/hetero_fixture.csv -> tests/data/nlme_reference.json (next to this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-nlme r-cran-emmeans r-cran-lmertest r-cran-jsonlite
#
# Model (freezestats.stats.fit_mixed(variance="per_size"), treatment coding with frozen_layers = 0 and the
# smallest train_size as reference levels):
#   lme(best_dev ~ frozen_layers * train_size, random = ~ 1 | seed / train_size,
#       weights = varIdent(form = ~ 1 | train_size), method = "REML")
# Also: lmerTest fits per train size (best_dev ~ frozen_layers + (1 | seed)), whose Satterthwaite df for a
# contrast within the size is the closed form (S - 1)(K - 1) in a balanced table; the Python test checks its
# single-size fit against them. Term names are written in patsy's spelling so the test can compare by name.

suppressPackageStartupMessages({
  library(nlme)
  library(emmeans)
  library(lmerTest)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "hetero_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "nlme_reference.json")

d <- read.csv(fixture)
frozen_levels <- c(0, setdiff(sort(unique(d$frozen_layers)), 0))
d$frozen_layers <- factor(d$frozen_layers, levels = frozen_levels)
d$train_size <- factor(d$train_size, levels = sort(unique(as.integer(d$train_size))))
d$seed <- factor(d$seed)

# nlme's default optimiser settings: tighter nlminb tolerances stop with "singular convergence" on this table,
# and the default optimum agrees with optim(rel.tol = 1e-12, msTol = 1e-12) to 1e-9 in the log-likelihood.
control <- lmeControl()
fit <- lme(best_dev ~ frozen_layers * train_size, random = ~ 1 | seed / train_size,
           weights = varIdent(form = ~ 1 | train_size), data = d, method = "REML", control = control)

patsy_term <- function(name) {
  if (name == "(Intercept)") return("Intercept")
  parts <- strsplit(name, ":", fixed = TRUE)[[1]]
  parts <- sub("^frozen_layers(.*)$", "frozen_layers[T.\\1]", parts)
  parts <- sub("^train_size(.*)$", "train_size[T.\\1]", parts)
  paste(parts, collapse = ":")
}

beta <- fixef(fit)
fixed <- data.frame(term = vapply(names(beta), patsy_term, ""), estimate = unname(beta),
                    se = unname(sqrt(diag(vcov(fit)))), row.names = NULL)

ratios <- coef(fit$modelStruct$varStruct, unconstrained = FALSE, allCoef = TRUE)
residual_sd <- data.frame(train_size = as.integer(names(ratios)), sd = unname(fit$sigma * ratios))
# as.matrix(reStruct) holds each random effect's variance relative to sigma^2 (VarCorr would round to 7 digits).
relative <- as.matrix(fit$modelStruct$reStruct)
random_sd <- list(seed = fit$sigma * sqrt(relative$seed[1, 1]),
                  `seed:train_size` = fit$sigma * sqrt(relative$train_size[1, 1]))

emm <- emmeans(fit, ~ frozen_layers | train_size, mode = "satterthwaite")
emm_table <- as.data.frame(summary(emm))[, c("frozen_layers", "train_size", "emmean", "SE")]
con <- as.data.frame(summary(contrast(emm, method = "trt.vs.ctrl", ref = 1, adjust = "none")))
level_of <- function(contrast) gsub("[()]|frozen_layers", "", sub(" - .*$", "", contrast))
con$frozen_layers <- level_of(con$contrast)
con_table <- con[, c("frozen_layers", "train_size", "estimate", "SE")]

per_size <- lapply(levels(d$train_size), function(n) {
  sub <- droplevels(d[d$train_size == n, ])
  m <- lmerTest::lmer(best_dev ~ frozen_layers + (1 | seed), data = sub, REML = TRUE)
  e <- emmeans(m, ~ frozen_layers, lmer.df = "satterthwaite")
  ct <- as.data.frame(summary(contrast(e, method = "trt.vs.ctrl", ref = 1, adjust = "none")))
  data.frame(train_size = as.integer(n), frozen_layers = level_of(ct$contrast),
             estimate = ct$estimate, se = ct$SE, df = ct$df)
})

result <- list(
  r_version = R.version.string,
  nlme_version = as.character(packageVersion("nlme")),
  emmeans_version = as.character(packageVersion("emmeans")),
  lmerTest_version = as.character(packageVersion("lmerTest")),
  model = "lme(best_dev ~ frozen_layers * train_size, random = ~1 | seed/train_size, weights = varIdent(~1 | train_size), REML)",
  logLik = as.numeric(logLik(fit)),
  fixed_effects = fixed,
  residual_sd = residual_sd,
  random_sd = random_sd,
  emmeans = emm_table,
  contrasts = con_table,
  per_size_lmertest = do.call(rbind, per_size)
)
writeLines(toJSON(result, digits = NA, pretty = TRUE, auto_unbox = TRUE), output)
