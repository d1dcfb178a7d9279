/* policies - the built-in policies' ops, one per file in policies/. Only
 * registry.c lists them; nothing else names a policy directly. */
#ifndef POL_POLICIES_H
#define POL_POLICIES_H

#include <bellows/policy.h>

extern const bellows_policy_ops pol_fixed_ops;
extern const bellows_policy_ops pol_schedule_ops;
extern const bellows_policy_ops pol_accordion_ops;
extern const bellows_policy_ops pol_accordion_batch_ops;
extern const bellows_policy_ops pol_adaqs_ops;
extern const bellows_policy_ops pol_slimgc_ops;
extern const bellows_policy_ops pol_comet_ops;
extern const bellows_policy_ops pol_comet_batch_ops;
extern const bellows_policy_ops pol_perfmodel_ops;
extern const bellows_policy_ops pol_resireduce_ops;
extern const bellows_policy_ops pol_gcomp_ops;

#endif /* POL_POLICIES_H */
