/*
 * IPv4 subnet <-> host-index arithmetic and pool marking on a bitset.
 *
 * A subnet's bitset has one bit per address (2^(32-prefix) bits), bit 0 is
 * the network address.  Prefixes shorter than /8 are rejected because the
 * bitset would exceed FP_MAX_BITS.  Everything is validated before the
 * first write so a rejected call leaves the bitset unchanged.
 */
#include "fastpath.h"

#define MIN_PREFIX 8 /* 2^(32-8) addresses == FP_MAX_BITS */

static int check_subnet(int64_t network, int64_t prefix)
{
    if (prefix < MIN_PREFIX || prefix > 32)
        return FP_ERR_PREFIX;
    if (network < 0 || network > UINT32_MAX)
        return FP_ERR_SUBNET;
    int64_t hostmask = (INT64_C(1) << (32 - prefix)) - 1;
    if (network & hostmask)
        return FP_ERR_SUBNET;
    return 0;
}

static int64_t subnet_size(int64_t prefix)
{
    return INT64_C(1) << (32 - prefix);
}

int64_t fp_addr_host_to_ip(int64_t network, int64_t prefix, int64_t index)
{
    int rc = check_subnet(network, prefix);
    if (rc < 0)
        return rc;
    if (index < 0 || index >= subnet_size(prefix))
        return FP_ERR_INDEX;
    return network + index;
}

int64_t fp_addr_ip_to_host(int64_t network, int64_t prefix, int64_t ip)
{
    int rc = check_subnet(network, prefix);
    if (rc < 0)
        return rc;
    if (ip < network || ip >= network + subnet_size(prefix))
        return FP_ERR_SUBNET;
    return ip - network;
}

static int check_pool_bitset(uint32_t nbits, int64_t network, int64_t prefix)
{
    int rc = check_subnet(network, prefix);
    if (rc < 0)
        return rc;
    return (int64_t)nbits == subnet_size(prefix) ? 0 : FP_ERR_SIZE;
}

int fp_addr_apply_pool(uint64_t *words, uint32_t nbits, int64_t network, int64_t prefix,
                       int64_t first_ip, int64_t last_ip)
{
    int rc = check_pool_bitset(nbits, network, prefix);
    if (rc < 0)
        return rc;
    int64_t first = fp_addr_ip_to_host(network, prefix, first_ip);
    if (first < 0)
        return (int)first;
    int64_t last = fp_addr_ip_to_host(network, prefix, last_ip);
    if (last < 0)
        return (int)last;
    if (first > last)
        return FP_ERR_ORDER;
    /* Contiv marks addresses outside an EPG's pool as used in the network's set. */
    fp_bs_set_range(words, nbits, 0, first);
    fp_bs_set_range(words, nbits, last + 1, nbits);
    return 0;
}

int fp_addr_reserve(uint64_t *words, uint32_t nbits, int64_t network, int64_t prefix,
                    int has_gateway, int64_t gateway_ip)
{
    int rc = check_pool_bitset(nbits, network, prefix);
    if (rc < 0)
        return rc;
    int64_t gateway = -1;
    if (has_gateway) {
        gateway = fp_addr_ip_to_host(network, prefix, gateway_ip);
        if (gateway < 0)
            return (int)gateway;
    }
    /* /31 and /32 have no network or broadcast address (RFC 3021). */
    if (prefix <= 30) {
        fp_bs_set(words, nbits, 0);
        fp_bs_set(words, nbits, nbits - 1);
    }
    if (gateway >= 0)
        fp_bs_set(words, nbits, gateway);
    return 0;
}
