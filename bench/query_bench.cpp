// kitfox_query_bench: work in progress.
int main() { return 0; }
