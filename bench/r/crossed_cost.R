# The cost interval of freezestats.stats.decision.crossed, refitted with lmerTest: d ~ 1 + (1|pair) + (1|item),
# REML, Satterthwaite df for the intercept, on the pilot's per-item differences (bench/r/crossed_cost.py writes
# them). Balanced and with positive components, REML equals the ANOVA estimates, so the two should agree.
suppressPackageStartupMessages(library(lmerTest))
args <- commandArgs(trailingOnly = TRUE)  # optional: the folder of the input (and of the output)
here <- if (length(args)) args[1] else dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
input <- read.csv(file.path(here, "crossed_cost_input.csv"))
out <- do.call(rbind, lapply(split(input, input$depth), function(x) {
  fit <- lmer(d ~ 1 + (1 | pair) + (1 | item), data = x, REML = TRUE)
  co <- summary(fit, ddf = "Satterthwaite")$coefficients
  half <- qt(0.975, co[1, "df"]) * co[1, "Std. Error"]
  data.frame(depth = x$depth[1], estimate = co[1, "Estimate"], se = co[1, "Std. Error"], df = co[1, "df"],
             ci_low = co[1, "Estimate"] - half, ci_high = co[1, "Estimate"] + half)
}))
write.csv(out, file.path(here, "crossed_cost_r.csv"), row.names = FALSE)
print(out, digits = 6)
