#!/usr/bin/env Rscript
# Reference values for tests/test_stats_ftest.py: F tests with Satterthwaite's df (lmerTest), and the
# likelihood-ratio tests of the per-size and the pooled model (nlme), on tests/data/hetero_fixture.csv.
#
#   Rscript tests/data/ftest_reference.R [FIXTURE_CSV [OUTPUT_JSON]]
#
# Defaults: tests/data/hetero_fixture.csv -> tests/data/ftest_reference.json (next to this script).
# Debian/Ubuntu: apt-get install r-base-core r-cran-nlme r-cran-lmertest r-cran-jsonlite
#
# (a) The F/df machinery, on a homoscedastic, unbalanced version of the fixture (lme4 has one residual
#     variance, and in a balanced table every within-seed contrast has an integer df, which would not
#     exercise the eigen-directions):
#       y_hom = cell mean + (best_dev - cell mean) * 0.02 / sd[train_size],  sd = 0.07 / 0.02 / 0.0044 at
#       50 / 200 / 1000 (the fixture's generating SDs; cell means over the 5 seeds), then three runs dropped:
#       (seed 5, frozen 2, size 200), (seed 1, frozen -1, size 1000), (seed 3, frozen 4, size 50).
#     Model: lmer(y_hom ~ frozen_layers * train_size + (1 | seed) + (1 | seed:train_size), REML = TRUE);
#     lmerTest's anova(ddf = "Satterthwaite") and contest(joint = TRUE) of several hypothesis matrices L, whose
#     columns are named in patsy's spelling so the Python test builds the same L.
# (b) The per-size model by ML, full (frozen_layers * train_size) and additive (frozen_layers + train_size):
#       lme(best_dev ~ ..., random = ~ 1 | seed / train_size, weights = varIdent(form = ~ 1 | train_size),
#           method = "ML")
#     and the likelihood-ratio statistic of anova(additive, full).
# (c) The pooled model (freezestats.stats.fit_pooled) on two tasks (the fixture, and its homoscedastic version
#     before the drops plus 0.02 * (frozen_layers != 0) * log10(train_size / 50)), by ML (full vs
#     task * train_size + frozen_layers * train_size) and REML:
#       lme(y ~ task * frozen_layers * train_size, random = ~ 1 | task_seed / train_size,
#           weights = varIdent(form = ~ 1 | task:train_size))

suppressPackageStartupMessages({
  library(nlme)
  library(lmerTest)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(script)) dirname(normalizePath(script)) else "."
fixture <- if (length(args) >= 1) args[[1]] else file.path(here, "hetero_fixture.csv")
output <- if (length(args) >= 2) args[[2]] else file.path(here, "ftest_reference.json")

raw <- read.csv(fixture)
frozen_levels <- c(0, setdiff(sort(unique(raw$frozen_layers)), 0))
prepare <- function(d) {
  d$frozen_layers <- factor(d$frozen_layers, levels = frozen_levels)
  d$train_size <- factor(d$train_size, levels = sort(unique(as.integer(d$train_size))))
  d$seed <- factor(d$seed)
  d
}

patsy_term <- function(name) {
  if (name == "(Intercept)") return("Intercept")
  parts <- strsplit(name, ":", fixed = TRUE)[[1]]
  parts <- sub("^frozen_layers(.*)$", "frozen_layers[T.\\1]", parts)
  parts <- sub("^train_size(.*)$", "train_size[T.\\1]", parts)
  paste(parts, collapse = ":")
}

# ---- (a) homoscedastic, unbalanced version: lmerTest ----------------------------------------------------------
generating_sd <- c(`50` = 0.07, `200` = 0.02, `1000` = 0.0044)
hom <- raw
cell_mean <- ave(hom$best_dev, hom$frozen_layers, hom$train_size)
hom$y_hom <- cell_mean + (hom$best_dev - cell_mean) * 0.02 / generating_sd[as.character(hom$train_size)]
drop <- (hom$seed == 5 & hom$frozen_layers == 2 & hom$train_size == 200) |
  (hom$seed == 1 & hom$frozen_layers == -1 & hom$train_size == 1000) |
  (hom$seed == 3 & hom$frozen_layers == 4 & hom$train_size == 50)
hom <- prepare(hom[!drop, ])

m <- lmerTest::lmer(y_hom ~ frozen_layers * train_size + (1 | seed) + (1 | seed:train_size), data = hom,
                    REML = TRUE, control = lmerControl(optimizer = "bobyqa",
                                                       optCtrl = list(rhobeg = 1e-3, rhoend = 1e-12)))
if (isSingular(m)) stop("the homoscedastic fit is singular: choose another version of the fixture")
names_beta <- vapply(names(fixef(m)), patsy_term, "")
vc <- as.data.frame(VarCorr(m))
unit_rows <- function(idx) {
  L <- matrix(0, length(idx), length(names_beta))
  L[cbind(seq_along(idx), idx)] <- 1
  L
}
is_inter <- grepl(":", names_beta)
is_frozen <- grepl("^frozen_layers\\[", names_beta) & !is_inter
is_size <- grepl("^train_size\\[", names_beta) & !is_inter
mixed <- matrix(0, 4, length(names_beta))  # rows mixing strata: differences of cells across seeds and sizes
mixed[1, names_beta == "train_size[T.200]"] <- 1
mixed[2, names_beta %in% c("frozen_layers[T.2]", "frozen_layers[T.2]:train_size[T.1000]")] <- 1
mixed[3, names_beta %in% c("Intercept", "frozen_layers[T.-1]")] <- c(1, 0.5)
mixed[4, names_beta %in% c("train_size[T.1000]", "frozen_layers[T.4]:train_size[T.200]")] <- c(1, -2)
hypotheses <- list(
  interaction = unit_rows(which(is_inter)),
  frozen = unit_rows(which(is_frozen)),
  size = unit_rows(which(is_size)),
  mixed = mixed,
  rank_deficient = rbind(unit_rows(which(is_size)), colSums(unit_rows(which(is_size))))
)
contests <- lapply(names(hypotheses), function(name) {
  L <- hypotheses[[name]]
  res <- lmerTest::contest(m, L, joint = TRUE, ddf = "Satterthwaite")
  colnames(L) <- names_beta
  list(name = name, L = as.data.frame(L), f_stat = res[["F value"]], num_df = res[["NumDF"]],
       den_df = res[["DenDF"]], p_val = res[["Pr(>F)"]])
})
names(contests) <- names(hypotheses)
single <- lmerTest::contest(m, mixed[2, ], joint = FALSE, ddf = "Satterthwaite")
aov <- anova(m, ddf = "Satterthwaite", type = 3)
anova_table <- data.frame(term = rownames(aov), f_stat = aov[["F value"]], num_df = aov[["NumDF"]],
                          den_df = aov[["DenDF"]], p_val = aov[["Pr(>F)"]], row.names = NULL)

# ---- (b) per-size model, ML: full vs additive (nlme) ------------------------------------------------------------
d <- prepare(raw)
control <- lmeControl()
full <- lme(best_dev ~ frozen_layers * train_size, random = ~ 1 | seed / train_size,
            weights = varIdent(form = ~ 1 | train_size), data = d, method = "ML", control = control)
additive <- lme(best_dev ~ frozen_layers + train_size, random = ~ 1 | seed / train_size,
                weights = varIdent(form = ~ 1 | train_size), data = d, method = "ML", control = control)
comparison <- anova(additive, full)

# ---- (c) the pooled model of two tasks (nlme) --------------------------------------------------------------------
# Task "a" is the fixture, task "b" its homoscedastic version before the three runs are dropped, plus a freezing
# effect that grows with the train size, 0.02 * (frozen_layers != 0) * log10(train_size / 50).
two <- rbind(transform(raw, task = "a", y = best_dev),
             transform(raw, task = "b", y = cell_mean + (best_dev - cell_mean) * 0.02 /
                                             generating_sd[as.character(raw$train_size)] +
                                             0.02 * (frozen_layers != 0) * log10(train_size / 50)))
two <- prepare(two)
two$task <- factor(two$task)
two$task_seed <- interaction(two$task, two$seed)
two$task_size <- interaction(two$task, two$train_size)
pooled_fit <- function(formula, method) {
  lme(formula, random = ~ 1 | task_seed / train_size, weights = varIdent(form = ~ 1 | task_size), data = two,
      method = method, control = control)
}
pooled_full <- pooled_fit(y ~ task * frozen_layers * train_size, "ML")
pooled_reduced <- pooled_fit(y ~ task * train_size + frozen_layers * train_size, "ML")
pooled_comparison <- anova(pooled_reduced, pooled_full)
pooled_reml <- pooled_fit(y ~ task * frozen_layers * train_size, "REML")
pooled_ratios <- coef(pooled_reml$modelStruct$varStruct, unconstrained = FALSE, allCoef = TRUE)
pooled_relative <- as.matrix(pooled_reml$modelStruct$reStruct)

result <- list(
  r_version = R.version.string,
  lme4_version = as.character(packageVersion("lme4")),
  lmerTest_version = as.character(packageVersion("lmerTest")),
  nlme_version = as.character(packageVersion("nlme")),
  homoscedastic = list(
    model = "lmer(y_hom ~ frozen_layers * train_size + (1 | seed) + (1 | seed:train_size), REML = TRUE)",
    n_obs = nrow(hom),
    sum_y = sum(hom$y_hom),
    reml_loglik = as.numeric(logLik(m)),
    variances = list(seed = vc$vcov[vc$grp == "seed"], `seed:train_size` = vc$vcov[vc$grp == "seed:train_size"],
                     residual = vc$vcov[vc$grp == "Residual"]),
    fixed_effects = data.frame(term = names_beta, estimate = unname(fixef(m)), row.names = NULL),
    anova = anova_table,
    contest = contests,
    contest1d = list(L = setNames(as.list(mixed[2, ]), names_beta), t_stat = single[["t value"]],
                     df = single[["df"]])
  ),
  per_size_lrt = list(
    model = "lme(..., random = ~1 | seed/train_size, weights = varIdent(~1 | train_size), method = 'ML')",
    llf_full = as.numeric(logLik(full)),
    llf_reduced = as.numeric(logLik(additive)),
    lr_stat = comparison[["L.Ratio"]][2],
    df = comparison[["df"]][2] - comparison[["df"]][1],
    p_val = comparison[["p-value"]][2]
  ),
  pooled = list(
    model = "lme(y ~ task * frozen_layers * train_size, random = ~1 | task_seed/train_size, weights = varIdent(~1 | task_size))",
    n_obs = nrow(two),
    sum_y = sum(two$y),
    llf_full = as.numeric(logLik(pooled_full)),
    llf_reduced = as.numeric(logLik(pooled_reduced)),
    lr_stat = pooled_comparison[["L.Ratio"]][2],
    df = pooled_comparison[["df"]][2] - pooled_comparison[["df"]][1],
    reml_loglik = as.numeric(logLik(pooled_reml)),
    residual_sd = data.frame(group = names(pooled_ratios), sd = unname(pooled_reml$sigma * pooled_ratios)),
    random_sd = list(`task:seed` = pooled_reml$sigma * sqrt(pooled_relative$task_seed[1, 1]),
                     `task:seed:train_size` = pooled_reml$sigma * sqrt(pooled_relative$train_size[1, 1]))
  )
)
writeLines(toJSON(result, digits = NA, pretty = TRUE, auto_unbox = TRUE), output)
